import type { Kysely } from 'kysely';
import type { DatabaseSchema } from '../storage/schema.js';

/**
 * Deletes the embedded log's entries written before `olderThan` (ms since the epoch): every
 * consumer group has long read them. Run whichever bus is in use, for what an embedded
 * deployment left behind.
 */
export async function pruneEventLog(db: Kysely<DatabaseSchema>, olderThan: number): Promise<void> {
  await db.deleteFrom('event_log').where('created_at', '<', olderThan).execute();
}
