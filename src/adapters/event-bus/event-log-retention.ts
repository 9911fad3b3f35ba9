import type { Kysely } from 'kysely';
import type { DatabaseSchema } from '../storage/schema.js';

/**
 * Deletes the embedded log's entries written before `olderThan` (ms since the epoch), by age
 * alone, as JetStream's `max_age` does: a group that has not read them by then (its consumers
 * stopped for longer than EVENT_RETENTION_DAYS) never will, which the setting's documentation
 * says. Run whichever bus is in use, for what an embedded deployment left behind.
 */
export async function pruneEventLog(db: Kysely<DatabaseSchema>, olderThan: number): Promise<void> {
  await db.deleteFrom('event_log').where('created_at', '<', olderThan).execute();
}
