import { dropIndexes, type SchemaMigration } from './migration.js';

/**
 * Who created a mapping: the signed-in user's id, or null for a mapping created anonymously (all
 * existing ones). The indexes serve `GET /urls` by owner and newest first at any size.
 */
export const urlMappingOwners: SchemaMigration = {
  name: '0060_url_mapping_owners',
  async up(db, { bigint }) {
    await db.schema.alterTable('url_mappings').addColumn('owner_id', bigint).execute();
    await db.schema.createIndex('url_mappings_owner_id').on('url_mappings').columns(['owner_id', 'id']).execute();
    await db.schema.createIndex('url_mappings_created_at').on('url_mappings').columns(['created_at', 'id']).execute();
    await db.schema
      .createIndex('url_mappings_owner_created_at')
      .on('url_mappings')
      .columns(['owner_id', 'created_at', 'id'])
      .execute();
  },
  async down(db) {
    await dropIndexes('url_mappings_owner_created_at', 'url_mappings_created_at', 'url_mappings_owner_id')(db);
    await db.schema.alterTable('url_mappings').dropColumn('owner_id').execute();
  },
};
