import { type Kysely, sql } from 'kysely';
import type { Dialect } from './database.js';
import type { DatabaseSchema } from './schema.js';

type Transaction = Kysely<DatabaseSchema>;

/** Thrown inside the transaction to roll back an insert that took its user past the limit. */
class OverTheLimit extends Error {}

/** One user's rows of one kind, at most `max` of them. */
export interface PerUserLimit {
  readonly dialect: Dialect;
  /** PostgreSQL: the advisory lock's first key, one per kind of row (the user id is the second). */
  readonly lockClass: number;
  readonly userId: number;
  readonly max: number;
}

/**
 * Inserts a row of a user's within `limit`, across instances, in the transaction `transact` runs
 * (a plain one, or the outbox's with its events): `insert` adds the row, `count` then counts the
 * user's rows of its kind; past `limit.max` the transaction is rolled back and the answer is
 * undefined. The user's inserts of that kind wait for each other until their transactions end,
 * so the count after the insert is exact. PostgreSQL: a transaction-scoped advisory lock, taken
 * before the insert; the count, a statement of its own, sees what the transactions before it
 * committed. SQLite: the insert takes the database's one write lock, held to the commit.
 */
export async function insertWithinLimit<T>(
  transact: (change: (trx: Transaction) => Promise<T>) => Promise<T>,
  limit: PerUserLimit,
  insert: (trx: Transaction) => Promise<T>,
  count: (trx: Transaction) => Promise<number>,
): Promise<T | undefined> {
  try {
    return await transact(async (trx) => {
      if (limit.dialect === 'postgres') {
        await sql`select pg_advisory_xact_lock(${limit.lockClass}, ${limit.userId % 2 ** 31})`.execute(trx);
      }
      const inserted = await insert(trx);
      if ((await count(trx)) > limit.max) throw new OverTheLimit();
      return inserted;
    });
  } catch (error) {
    if (error instanceof OverTheLimit) return undefined;
    throw error;
  }
}
