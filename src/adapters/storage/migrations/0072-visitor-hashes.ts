import { dropTables, type SchemaMigration } from './migration.js';

/**
 * Unique-ish visitors: the day's salt, one random value per UTC day shared by every instance,
 * deleted once the day is over. The hashes it makes are never stored one by one: each only
 * raises a register of its day's sketch in `visit_days` (migration 0071).
 */
export const visitorHashes: SchemaMigration = {
  name: '0072_visitor_hashes',
  async up(db, { bigint }) {
    await db.schema
      .createTable('visit_salts')
      .addColumn('day', bigint, (c) => c.primaryKey())
      .addColumn('salt', 'text', (c) => c.notNull())
      .execute();
  },
  down: dropTables('visit_salts'),
};
