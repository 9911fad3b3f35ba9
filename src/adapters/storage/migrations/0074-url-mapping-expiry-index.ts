import { sql } from 'kysely';
import { dropIndexes, type SchemaMigration } from './migration.js';

/**
 * The expiry sweep's index: only links with an `expires_at` whose `url.expired` is not yet
 * published, in expiry order, so that the sweep reads just the ones due, however many links exist.
 */
export const urlMappingExpiryIndex: SchemaMigration = {
  name: '0074_url_mapping_expiry_index',
  async up(db) {
    await db.schema
      .createIndex('url_mappings_expiring')
      .on('url_mappings')
      .column('expires_at')
      .where(sql.ref('expired_event_at'), 'is', null)
      .where(sql.ref('expires_at'), 'is not', null)
      .execute();
  },
  down: dropIndexes('url_mappings_expiring'),
};
