import { sql } from 'kysely';
import type { AnyKysely } from '../database.js';
import type { SchemaMigration } from './migration.js';

/** Any constant of our own: concurrent migrations of several schemas create the extension once. */
const PG_TRGM_LOCK = 0x7472676d; // "trgm"

/**
 * `GET /urls?q=`: a substring of the code or the target URL, found through an index at any size.
 *
 * - SQLite: an FTS5 table with the trigram tokenizer over `code` and `url` (external content, so
 *   the text is not stored twice). Indexing a row costs ~60 µs, several times its insert, so new
 *   rows are indexed in batches off the request path (`KyselyUrlMappingRepository.indexSearch`)
 *   up to `indexed_up_to`, and a search reads the rows beyond it directly. Rows already indexed
 *   are kept in step by triggers when their code or URL changes or they are deleted. Clicks
 *   update neither column, so compaction never touches it.
 * - PostgreSQL: pg_trgm GIN indexes on both columns (ILIKE uses them). The extension lives in
 *   `public`, never in a schema that may be dropped; where it cannot be created (no privilege),
 *   the migration leaves the indexes out and a search reads the whole table (README says so).
 */
export const urlMappingSearch: SchemaMigration = {
  name: '0061_url_mapping_search',
  async up(db, { bigint }) {
    if (bigint === 'integer') await sqliteSearch(db);
    else await postgresSearch(db);
  },
  async down(db) {
    for (const trigger of ['insert', 'delete', 'update'])
      await sql.raw(`DROP TRIGGER IF EXISTS url_mappings_search_${trigger}`).execute(db);
    await sql`DROP TABLE IF EXISTS url_mappings_search`.execute(db);
    await sql`DROP INDEX IF EXISTS url_mappings_code_trgm`.execute(db);
    await sql`DROP INDEX IF EXISTS url_mappings_url_trgm`.execute(db);
  },
};

async function sqliteSearch(db: AnyKysely): Promise<void> {
  await sql`
    CREATE VIRTUAL TABLE url_mappings_search USING fts5(
      code, url, content='url_mappings', content_rowid='id', tokenize='trigram', detail='none')`.execute(db);
  await sql`INSERT INTO url_mappings_search (url_mappings_search) VALUES ('rebuild')`.execute(db);
  // One row: the mappings with an id up to this are in the index.
  await sql`CREATE TABLE url_mappings_search_state (indexed_up_to INTEGER NOT NULL)`.execute(db);
  await sql`
    INSERT INTO url_mappings_search_state (indexed_up_to)
    SELECT COALESCE(MAX(id), 0) FROM url_mappings`.execute(db);
  const indexed = sql.raw('old.id <= (SELECT indexed_up_to FROM url_mappings_search_state)');
  await sql`
    CREATE TRIGGER url_mappings_search_delete AFTER DELETE ON url_mappings WHEN ${indexed} BEGIN
      INSERT INTO url_mappings_search (url_mappings_search, rowid, code, url) VALUES ('delete', old.id, old.code, old.url);
    END`.execute(db);
  await sql`
    CREATE TRIGGER url_mappings_search_update AFTER UPDATE OF code, url ON url_mappings WHEN ${indexed} BEGIN
      INSERT INTO url_mappings_search (url_mappings_search, rowid, code, url) VALUES ('delete', old.id, old.code, old.url);
      INSERT INTO url_mappings_search (rowid, code, url) VALUES (new.id, new.code, new.url);
    END`.execute(db);
}

/** The schema pg_trgm is installed in, installing it in `public` when it is not yet anywhere. */
async function trigramSchema(db: AnyKysely): Promise<string | undefined> {
  const installed = async () =>
    (
      await sql<{ schema: string }>`
        SELECT n.nspname AS schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
        WHERE e.extname = 'pg_trgm'`.execute(db)
    ).rows[0]?.schema;
  const found = await installed();
  if (found !== undefined) return found;
  // Held to the end of this migration's transaction: a concurrent one waits, then finds it.
  await sql`SELECT pg_advisory_xact_lock(${PG_TRGM_LOCK})`.execute(db);
  const meanwhile = await installed();
  if (meanwhile !== undefined) return meanwhile;
  await sql`SAVEPOINT pg_trgm`.execute(db);
  try {
    await sql`CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public`.execute(db);
    await sql`RELEASE SAVEPOINT pg_trgm`.execute(db);
    return 'public';
  } catch {
    await sql`ROLLBACK TO SAVEPOINT pg_trgm`.execute(db);
    return undefined;
  }
}

async function postgresSearch(db: AnyKysely): Promise<void> {
  const schema = await trigramSchema(db);
  if (schema === undefined) return;
  const ops = sql.raw(`${quoteIdentifier(schema)}.gin_trgm_ops`);
  await sql`CREATE INDEX url_mappings_code_trgm ON url_mappings USING gin (code ${ops})`.execute(db);
  await sql`CREATE INDEX url_mappings_url_trgm ON url_mappings USING gin (url ${ops})`.execute(db);
}

const quoteIdentifier = (name: string) => `"${name.replaceAll('"', '""')}"`;
