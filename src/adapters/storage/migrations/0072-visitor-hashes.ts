import { sql } from 'kysely';
import { required } from './columns.js';
import { dropTables, type SchemaMigration } from './migration.js';

/**
 * Unique-ish visitors: the day's salt (one random value per UTC day, shared by every instance)
 * and, per mapping and day, the visitors seen so far as 48 bits of a salted hash of address and
 * `User-Agent`. Salts and hashes live in separate tables and are both deleted once their day is
 * over, so a hash is never kept with the salt that made it past the day (`visit_uniques` keeps
 * only the count).
 */
export const visitorHashes: SchemaMigration = {
  name: '0072_visitor_hashes',
  async up(db, { bigint }) {
    await db.schema
      .createTable('visit_salts')
      .addColumn('day', bigint, (c) => c.primaryKey())
      .addColumn('salt', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('visit_visitors')
      .$call(required(bigint, 'url_id', 'day', 'hash'))
      .addPrimaryKeyConstraint('visit_visitors_pk', ['url_id', 'day', 'hash'])
      .modifyEnd(bigint === 'integer' ? sql`WITHOUT ROWID` : sql``)
      .execute();
    await db.schema.createIndex('visit_visitors_day').on('visit_visitors').column('day').execute();
  },
  down: dropTables('visit_visitors', 'visit_salts'),
};
