/**
 * Fast loaders of N seeded mappings into a migrated database. Both insert in code order (see
 * `seedKeysSorted`), so the unique index on `code` is appended to rather than written all over.
 *
 * - SQLite: one transaction of one prepared statement, rollback journal in memory and no syncs
 *   while loading, then back to WAL as the service keeps it; the search index built meanwhile by
 *   another process in a file of its own and copied in.
 * - PostgreSQL: one `COPY ... FROM STDIN` fed from here, the secondary indexes built after it on
 *   two connections, then VACUUM ANALYZE: without it the first reads of every page set its hint
 *   bits (writes) and autovacuum starts on the fresh table, both in the middle of the first
 *   measurement.
 */
import { rmSync } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { SEED_CREATED_AT, seedCodeOfKey, seedKeysSorted, seedUrl } from './codes.js';
import { LoadPhases } from './phases.js';
import { runNode } from './processes.js';

/** FTS5's `automerge` when a table has never been given one. */
const FTS5_DEFAULT_AUTOMERGE = 4;

export async function loadSqlite(file: string, count: number, phases = new LoadPhases()): Promise<void> {
  const keys = seedKeysSorted(count);
  const side = `${file}.search`;
  rmSync(side, { force: true });
  // The search index built on the other core meanwhile (seed-search.ts), copied in after; the
  // build stopped (before its file is removed) when the load fails first.
  const definition = searchDefinition(file);
  const sideBuild = new AbortController();
  const searched = definition
    ? runNode(['--import', 'tsx', SEED_SEARCH, side, String(count), definition], {}, sideBuild.signal).then(
        () => true,
        (error: unknown) => error,
      )
    : undefined;
  const db = new SQLite(file);
  try {
    db.pragma('journal_mode = MEMORY');
    db.pragma('synchronous = OFF');
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma('cache_size = -262144');
    const insert = db.prepare('INSERT INTO url_mappings (code, url, created_at, click_count) VALUES (?, ?, ?, 0)');
    await phases.time('inserts', () =>
      db.transaction(() => {
        for (let i = 0; i < count; i++) {
          const code = seedCodeOfKey(keys[i]!);
          insert.run(code, seedUrl(code), SEED_CREATED_AT);
        }
      })(),
    );
    if (searched !== undefined) {
      const built = await phases.time('search index (rest of its side build)', () => searched);
      if (built !== true) throw built;
      await phases.time('search index copy', () => copySearch(db, side, count));
    }
    db.pragma('locking_mode = NORMAL');
    db.pragma('journal_mode = WAL');
  } finally {
    sideBuild.abort(new Error('the load ended before the search index side build did')); // a no-op once it has
    await searched;
    db.close();
    rmSync(side, { force: true });
  }
}

const SEED_SEARCH = fileURLToPath(new URL('./seed-search.ts', import.meta.url));

/**
 * The `CREATE VIRTUAL TABLE` of the search index as the migrated file holds it (what the copy's
 * tables must have been made by), or undefined before migration 0061.
 */
function searchDefinition(file: string): string | undefined {
  const db = new SQLite(file, { readonly: true });
  try {
    const row = db.prepare("SELECT sql FROM sqlite_master WHERE name = 'url_mappings_search'").get() as
      { sql: string } | undefined;
    return row?.sql;
  } finally {
    db.close();
  }
}

/**
 * The search index (migration 0061) over the loaded rows: the tables of the one `seed-search.ts`
 * built in `side` copied over the empty ones the migration made (SQLite's shadow tables of FTS5,
 * writable only with `unsafeMode`), and every row marked indexed. It holds rows 1 to `count`, so
 * the loaded rows must be those; they are, in a freshly migrated file (checked). At 10,000,000
 * rows a rebuild after the inserts took 67 + 12 s of the load's 137; built beside them, the copy
 * takes what is left (bench/PROFILE.md). Without it the service would index the whole dataset in
 * the background while it is measured.
 */
function copySearch(db: SQLite.Database, side: string, count: number): void {
  const ids = db.prepare('SELECT MIN(id) AS low, MAX(id) AS high, COUNT(*) AS n FROM url_mappings').get() as {
    low: number;
    high: number;
    n: number;
  };
  if (ids.low !== 1 || ids.high !== count || ids.n !== count)
    throw new Error(`the loaded rows are not ids 1 to ${count} (${JSON.stringify(ids)}): migrate a fresh file`);
  db.prepare('ATTACH DATABASE ? AS side').run(side);
  try {
    const tables = (
      db
        .prepare("SELECT name FROM side.sqlite_master WHERE type = 'table' AND name LIKE 'url_mappings_search_%'")
        .all() as { name: string }[]
    ).map((t) => t.name);
    db.unsafeMode(true);
    try {
      db.transaction(() => {
        for (const table of tables) {
          db.exec(`DELETE FROM main."${table}"`);
          db.exec(`INSERT INTO main."${table}" SELECT * FROM side."${table}"`);
        }
      })();
    } finally {
      db.unsafeMode(false);
    }
  } finally {
    db.exec('DETACH DATABASE side');
  }
  db.exec(
    `INSERT INTO url_mappings_search (url_mappings_search, rank) VALUES ('automerge', ${FTS5_DEFAULT_AUTOMERGE})`,
  );
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
export async function loadPostgres(
  client: pg.Client,
  count: number,
  another: () => Promise<pg.Client>,
  phases = new LoadPhases(),
): Promise<void> {
  const { rows: indexes } = await client.query<IndexDefinition>(
    `SELECT i.indexname AS name, i.indexdef AS definition FROM pg_indexes i
     JOIN pg_class c ON c.relname = i.indexname AND c.relnamespace = to_regnamespace(i.schemaname)
     JOIN pg_index x ON x.indexrelid = c.oid
     WHERE i.schemaname = current_schema() AND i.tablename = 'url_mappings'
       AND NOT x.indisprimary AND NOT x.indisunique`,
  );
  for (const { name } of indexes) await client.query(`DROP INDEX "${name.replaceAll('"', '""')}"`);
  const copy = client.query(copyFrom('COPY url_mappings (code, url, created_at, click_count) FROM STDIN'));
  await phases.time('copy', () => pipeline(Readable.from(copyRows(count)), copy));
  const longest = indexes.filter((i) => /\bgin\b/i.test(i.definition) && /\(url\b/.test(i.definition));
  const rest = indexes.filter((i) => !longest.includes(i));
  const build = async (connection: pg.Client, definitions: readonly IndexDefinition[], parallel: boolean) => {
    await connection.query("SET maintenance_work_mem = '512MB'");
    if (!parallel) await connection.query('SET max_parallel_maintenance_workers = 0');
    for (const { name, definition } of definitions) await phases.time(name, () => connection.query(definition));
  };
  const second = await another();
  try {
    // The others' B-tree builds without parallel workers: on two cores those took CPU from the
    // trigram build, which sets the total (158 s alone, 168-174 s beside them, 156 s now).
    await Promise.all([build(client, longest, true), build(second, rest, false)]);
  } finally {
    await second.end();
  }
  await phases.time('vacuum analyze', () => client.query('VACUUM ANALYZE url_mappings'));
}
