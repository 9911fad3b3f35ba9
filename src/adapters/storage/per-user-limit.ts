import { type Kysely, sql } from 'kysely';
import type { Dialect } from './database.js';
import type { DatabaseSchema } from './schema.js';

/** Thrown inside a transaction to roll back an insert that took its user past a limit. */
export class OverTheLimit extends Error {}

/**
 * Makes one user's inserts of one kind wait for each other until the transaction ends, across
 * instances, so that a count of the user's rows after the insert is exact. PostgreSQL: a
 * transaction-scoped advisory lock on (`lockClass`, the user), taken before the insert; the count
 * after it, a statement of its own, sees what the transactions before it committed. SQLite:
 * nothing to take; the insert takes the database's one write lock, held to the commit.
 */
export async function serialisePerUser(
  trx: Kysely<DatabaseSchema>,
  dialect: Dialect,
  lockClass: number,
  userId: number,
): Promise<void> {
  if (dialect === 'postgres') await sql`select pg_advisory_xact_lock(${lockClass}, ${userId % 2 ** 31})`.execute(trx);
}
