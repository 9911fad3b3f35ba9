import { sql } from 'kysely';
import type { AnyKysely } from '../database.js';
import { sqliteInstantOrder } from '../instant-order.js';
import type { SchemaMigration } from './migration.js';

const REPLACED = ['url_mappings_owner_created_at', 'url_mappings_created_at'];

/**
 * `GET /urls?sort=created_at` in time's order on SQLite. Migration 0060's indexes there ordered
 * the canonical text, which within one second is not time's order (see instant-order.ts); these
 * order `sqliteInstantOrder(created_at)`, which the list sorts and pages by. PostgreSQL's
 * `timestamptz` orders as time does: its indexes stay.
 */
export const urlMappingCreatedOrder: SchemaMigration = {
  name: '0062_url_mapping_created_order',
  async up(db, { timestamp }) {
    if (timestamp !== 'text') return;
    for (const index of REPLACED) await sql`DROP INDEX ${sql.id(index)}`.execute(db);
    await createOrderIndex(db, 'url_mappings_created_order', []);
    await createOrderIndex(db, 'url_mappings_owner_created_order', ['owner_id']);
  },
  async down(db) {
    // PostgreSQL kept 0060's indexes: IF EXISTS / IF NOT EXISTS leave it as it is.
    await sql`DROP INDEX IF EXISTS url_mappings_owner_created_order`.execute(db);
    await sql`DROP INDEX IF EXISTS url_mappings_created_order`.execute(db);
    await sql`CREATE INDEX IF NOT EXISTS url_mappings_created_at ON url_mappings (created_at, id)`.execute(db);
    await sql`CREATE INDEX IF NOT EXISTS url_mappings_owner_created_at ON url_mappings (owner_id, created_at, id)`.execute(
      db,
    );
  },
};

async function createOrderIndex(db: AnyKysely, name: string, leading: string[]): Promise<void> {
  const key = sqliteInstantOrder(sql.ref('created_at'));
  const first = leading.map((column) => sql`${sql.ref(column)}, `);
  await sql`CREATE INDEX ${sql.id(name)} ON url_mappings (${sql.join(first, sql``)}${key}, id)`.execute(db);
}
