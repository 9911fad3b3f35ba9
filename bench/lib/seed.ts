/**
 * Fast loaders of N seeded mappings into a migrated database. Both insert in code order (see
 * `seedKeysSorted`), so the unique index on `code` is appended to rather than written all over.
 *
 * - SQLite: one transaction of one prepared statement, rollback journal in memory and no syncs
 *   while loading, then back to WAL as the service keeps it.
 * - PostgreSQL: one `COPY ... FROM STDIN` fed from here, the secondary indexes built after it on
 *   two connections, then VACUUM ANALYZE: without it the first reads of every page set its hint
 *   bits (writes) and autovacuum starts on the fresh table, both in the middle of the first
 *   measurement.
 */
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { SEED_CREATED_AT, seedCodeOfKey, seedKeysSorted, seedUrl } from './codes.js';

/** FTS5's `automerge` when a table has never been given one. */
const FTS5_DEFAULT_AUTOMERGE = 4;

export function loadSqlite(file: string, count: number): void {
  const keys = seedKeysSorted(count);
  const db = new SQLite(file);
  try {
    db.pragma('journal_mode = MEMORY');
    db.pragma('synchronous = OFF');
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma('cache_size = -262144');
    const insert = db.prepare('INSERT INTO url_mappings (code, url, created_at, click_count) VALUES (?, ?, ?, 0)');
    db.transaction(() => {
      for (let i = 0; i < count; i++) {
        const code = seedCodeOfKey(keys[i]!);
        insert.run(code, seedUrl(code), SEED_CREATED_AT);
      }
    })();
    indexSqliteSearch(db);
    db.pragma('locking_mode = NORMAL');
    db.pragma('journal_mode = WAL');
  } finally {
    db.close();
  }
}

/**
 * The search index (migration 0061) over the loaded rows, as the migration builds it over rows
 * that exist: one FTS5 rebuild, and every row marked indexed. Without it the service would index
 * the whole dataset in the background while it is measured.
 */
function indexSqliteSearch(db: SQLite.Database): void {
  const hasIndex = db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'url_mappings_search_state'").get();
  if (hasIndex === undefined) return;
  // Merging segments while they are written ('automerge', 4 by default) is a good part of a
  // rebuild's time; one 'optimize' after it merges them in one pass. At 10,000,000 rows: 82 s
  // with it, 57 + 11 s this way, for the same index. The setting goes back to FTS5's default.
  const automerge = (value: number) =>
    db.exec(`INSERT INTO url_mappings_search (url_mappings_search, rank) VALUES ('automerge', ${value})`);
  automerge(0);
  db.exec("INSERT INTO url_mappings_search (url_mappings_search) VALUES ('rebuild')");
  db.exec("INSERT INTO url_mappings_search (url_mappings_search) VALUES ('optimize')");
  automerge(FTS5_DEFAULT_AUTOMERGE);
  db.exec('UPDATE url_mappings_search_state SET indexed_up_to = (SELECT COALESCE(MAX(id), 0) FROM url_mappings)');
}

/** COPY text rows of the seeded mappings, about a MiB at a time. */
function* copyRows(count: number): Generator<string> {
  const keys = seedKeysSorted(count);
  let chunk = '';
  for (let i = 0; i < count; i++) {
    const code = seedCodeOfKey(keys[i]!);
    chunk += `${code}\t${seedUrl(code)}\t${SEED_CREATED_AT}\t0\n`;
    if (chunk.length >= 1 << 20) {
      yield chunk;
      chunk = '';
    }
  }
  if (chunk !== '') yield chunk;
}

interface IndexDefinition {
  readonly name: string;
  readonly definition: string;
}

/**
 * COPY into the migrated table with its secondary indexes (the trigram ones above all) dropped
 * first and built again after, from their own definitions: a bulk build is many times faster
 * than index maintenance row by row, and leaves the same indexes. The builds run on two
 * connections, the longest (the trigram index over `url`, 100 s of the 190 at 10,000,000 rows
 * one at a time) on one and the others on the other, as PostgreSQL before 18 builds a GIN index
 * in one process: 194 s became 133 there. The second connection builds without parallel workers,
 * which would take CPU from the first's build. `another` opens the second connection.
 */
export async function loadPostgres(client: pg.Client, count: number, another: () => Promise<pg.Client>): Promise<void> {
  const { rows: indexes } = await client.query<IndexDefinition>(
    `SELECT i.indexname AS name, i.indexdef AS definition FROM pg_indexes i
     JOIN pg_class c ON c.relname = i.indexname AND c.relnamespace = to_regnamespace(i.schemaname)
     JOIN pg_index x ON x.indexrelid = c.oid
     WHERE i.schemaname = current_schema() AND i.tablename = 'url_mappings'
       AND NOT x.indisprimary AND NOT x.indisunique`,
  );
  for (const { name } of indexes) await client.query(`DROP INDEX "${name.replaceAll('"', '""')}"`);
  const copy = client.query(copyFrom('COPY url_mappings (code, url, created_at, click_count) FROM STDIN'));
  await pipeline(Readable.from(copyRows(count)), copy);
  const longest = indexes.filter((i) => /\bgin\b/i.test(i.definition) && /\(url\b/.test(i.definition));
  const rest = indexes.filter((i) => !longest.includes(i));
  const build = async (connection: pg.Client, definitions: readonly IndexDefinition[], parallel: boolean) => {
    await connection.query("SET maintenance_work_mem = '512MB'");
    if (!parallel) await connection.query('SET max_parallel_maintenance_workers = 0');
    for (const { definition } of definitions) await connection.query(definition);
  };
  const second = await another();
  try {
    // The others' B-tree builds without parallel workers: on two cores those took CPU from the
    // trigram build, which sets the total (158 s alone, 168-174 s beside them, 156 s now).
    await Promise.all([build(client, longest, true), build(second, rest, false)]);
  } finally {
    await second.end();
  }
  await client.query('VACUUM ANALYZE url_mappings');
}
