import type { SchemaMigration } from './migration.js';

/**
 * A link's lifecycle (README "Expiry and visit limits"): `expires_at` and `max_visits` (both null
 * for a link without them: every existing one), `visits_used`, the redirects reserved against
 * `max_visits` (a conditional UPDATE per limited redirect, so the limit holds exactly across
 * instances), and `expired_event_at`, set by whoever publishes the link's `url.expired` (the claim
 * that makes it once, whichever instance notices).
 */
export const urlMappingLifecycle: SchemaMigration = {
  name: '0073_url_mapping_lifecycle',
  async up(db, { bigint, timestamp }) {
    await db.schema.alterTable('url_mappings').addColumn('expires_at', timestamp).execute();
    await db.schema.alterTable('url_mappings').addColumn('max_visits', bigint).execute();
    await db.schema
      .alterTable('url_mappings')
      .addColumn('visits_used', bigint, (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema.alterTable('url_mappings').addColumn('expired_event_at', timestamp).execute();
  },
  async down(db) {
    for (const column of ['expired_event_at', 'visits_used', 'max_visits', 'expires_at']) {
      await db.schema.alterTable('url_mappings').dropColumn(column).execute();
    }
  },
};
