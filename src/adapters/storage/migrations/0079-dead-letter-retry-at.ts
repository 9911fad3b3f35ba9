import { sql } from 'kysely';
import type { SchemaMigration } from './migration.js';

/**
 * When a `retrying` dead letter's automatic re-publication is due (`retry_at`, ms since the
 * epoch), and the trace context of the `dlq.consume` span that decided it (`retry_context`, the
 * headers that span would have injected), so that the re-publication no longer waits inside the
 * dead-letter queue's handler: that held one message of a partition for DLQ_RETRY_DELAY_MS (30 s),
 * letters behind it waited their turn, a NATS ack wait as long as the delay delivered the message
 * again meanwhile, and an admin's discard made during the wait was undone by it. Letters waiting
 * at the upgrade are due at once.
 */
export const deadLetterRetryAt: SchemaMigration = {
  name: '0079_dead_letter_retry_at',
  async up(db, { bigint }) {
    await db.schema.alterTable('dead_letters').addColumn('retry_at', bigint).execute();
    await db.schema.alterTable('dead_letters').addColumn('retry_context', 'text').execute();
    await sql`UPDATE dead_letters SET retry_at = updated_at WHERE status = 'retrying'`.execute(db);
    await sql`CREATE INDEX dead_letters_due ON dead_letters (retry_at) WHERE status = 'retrying'`.execute(db);
  },
  async down(db) {
    await db.schema.dropIndex('dead_letters_due').execute();
    await db.schema.alterTable('dead_letters').dropColumn('retry_context').execute();
    await db.schema.alterTable('dead_letters').dropColumn('retry_at').execute();
  },
};
