/**
 * Databases holding N seeded mappings, loaded once and reused while their fingerprint matches.
 * The service's own migrations create the tables (and run again on a reused dataset, so a new
 * migration applies); rows are bulk-loaded directly (lib/seed.ts).
 *
 * - SQLite: a master file under BENCH_DATA_DIR (bench/.data/sqlite-10m.db) that no service opens;
 *   every service process gets a private copy (`isolate`), made once per group of scenarios.
 * - PostgreSQL: a schema per size (bench_data_10m) on the given database, its fingerprint in the
 *   schema's comment; before use it is reset to the loaded state (created rows deleted, click
 *   counts zeroed, tables that were empty emptied). Up to 100,000 mappings every service process
 *   gets a schema of its own, loaded afresh (bench_data_1k_default); above, they share the size's.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { registerCleanup } from './cleanup.js';
import { runNode } from './processes.js';
import { LoadPhases } from './phases.js';
import { loadPostgres, loadSqlite } from './seed.js';
import type { DatasetSize } from './settings.js';

export type BackendName = 'sqlite' | 'postgres';

/** Bump when what a loaded dataset holds changes (codes.ts, seed.ts). */
const DATASET_FORMAT = 3; // 3: the search index (0061) built over the loaded rows

export interface Dataset {
  readonly backend: BackendName;
  readonly size: DatasetSize;
  /** The service's DATABASE_URL for this dataset (PostgreSQL), or its master file (SQLite). */
  readonly databaseUrl: string;
  /** Seconds it took to load, or undefined when a stored one was reused. */
  readonly loadSeconds: number | undefined;
  /** Where the load's time went (`LoadPhases.record`), or undefined when reused. */
  readonly loadPhases: Record<string, number> | undefined;
  /** A private copy for one service process (SQLite), or the shared dataset (PostgreSQL). */
  isolate(name: string): Promise<TargetData>;
}

export interface TargetData {
  readonly databaseUrl: string;
  /** Rows whose code starts with `prefix` (what one target's shorten runs created). */
  countCreated(prefix: string): Promise<number>;
  /**
   * Visits written but not folded into the day rows yet: the service's journal rows not merged
   * (`visit_journal`) and segments not folded (`visit_unfolded`).
   */
  unfoldedVisits(): Promise<number>;
  /**
   * What autovacuum would have done by now, where the server runs without it (PostgreSQL with
   * `autovacuum = off`, as this machine's and CI's are): VACUUM of the target's tables that have
   * dead rows; the tables it vacuumed. Nothing elsewhere (SQLite reuses its free pages).
   */
  vacuum(): Promise<string[]>;
  /**
   * Transactions open now on the connections named `applicationName` (`ChildServer.applicationName`):
   * a target is stopped between its runs only with none (`stopBetweenRuns`). Always 0 on SQLite,
   * where every target has a file of its own and no lock is shared.
   */
  openTransactions(applicationName: string): Promise<number>;
  drop(): Promise<void>;
}

export interface StorageBackend {
  readonly name: BackendName;
  /** The database location, without credentials, for the report. */
  readonly where: string;
  open(size: DatasetSize, log: (text: string) => void): Promise<Dataset>;
}

interface Fingerprint {
  readonly format: number;
  readonly mappings: number;
}

const fingerprintOf = (size: DatasetSize): Fingerprint => ({ format: DATASET_FORMAT, mappings: size.mappings });
const sameFingerprint = (a: Partial<Fingerprint> | undefined, b: Fingerprint) =>
  a?.format === b.format && a.mappings === b.mappings;

function migrate(databaseUrl: string): Promise<void> {
  return runNode(['dist/cli.js', 'migrate'], { DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' });
}

/** A dataset loaded: its wall time and its phases'. */
interface Loaded {
  readonly seconds: number;
  readonly phases: LoadPhases;
}

async function timed(work: () => Promise<void> | void): Promise<number> {
  const start = performance.now();
  await work();
  return (performance.now() - start) / 1000;
}

/** The end of the range of codes that start with `prefix` (next character in byte order). */
const prefixEnd = (prefix: string) =>
  prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);

/** `SELECT count(*) FROM <from>` on a SQLite file (`from`: a table, and its WHERE if any). */
function sqliteCount(file: string, from = 'url_mappings', params: unknown[] = []): number {
  const db = new SQLite(file, { readonly: true });
  try {
    return (db.prepare(`SELECT count(*) AS n FROM ${from}`).get(...params) as { n: number }).n;
  } finally {
    db.close();
  }
}

/**
 * Folds the WAL into the main file, so that a copy of the main file alone is the whole database
 * (a migration run on a reused dataset, or a read-only count, may leave a WAL beside it).
 */
function checkpointSqlite(file: string): void {
  const db = new SQLite(file);
  try {
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
}

function removeSqlite(file: string): void {
  for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(`${file}${suffix}`, { force: true });
}

function readJson(file: string): Partial<Fingerprint> | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Partial<Fingerprint>;
  } catch {
    return undefined;
  }
}

async function loadSqliteMaster(file: string, size: DatasetSize): Promise<Loaded> {
  const loading = `${file}.loading`;
  removeSqlite(loading);
  const phases = new LoadPhases();
  const seconds = await timed(async () => {
    await phases.time('migrate', () => migrate(`sqlite:${loading}`));
    await loadSqlite(loading, size.mappings, phases);
  });
  const rows = sqliteCount(loading);
  if (rows !== size.mappings) throw new Error(`loaded ${rows} rows into ${loading}, expected ${size.mappings}`);
  checkpointSqlite(loading);
  removeSqlite(file);
  renameSync(loading, file);
  removeSqlite(loading);
  return { seconds, phases };
}

/** SQLite datasets: masters in `dataDir`, working copies in a directory of this run. */
export function sqliteBackend(dataDir: string): StorageBackend {
  const workDir = join(dataDir, `work-${process.pid}`);
  return {
    name: 'sqlite',
    where: dataDir,
    async open(size, log) {
      mkdirSync(workDir, { recursive: true });
      registerCleanup(() => rmSync(workDir, { recursive: true, force: true }));
      const file = join(dataDir, `sqlite-${size.label}.db`);
      const stamp = join(dataDir, `sqlite-${size.label}.json`);
      const wanted = fingerprintOf(size);
      let loaded: Loaded | undefined;
      if (existsSync(file) && sameFingerprint(readJson(stamp), wanted)) {
        log(`reusing ${file}`);
        await migrate(`sqlite:${file}`);
      } else {
        rmSync(stamp, { force: true });
        log(`loading ${size.mappings.toLocaleString('en-US')} mappings into ${file}`);
        loaded = await loadSqliteMaster(file, size);
        writeFileSync(stamp, `${JSON.stringify(wanted)}\n`);
      }
      const rows = sqliteCount(file);
      if (rows !== size.mappings) throw new Error(`${file} holds ${rows} rows, expected ${size.mappings}: delete it`);
      checkpointSqlite(file);
      return {
        backend: 'sqlite',
        size,
        databaseUrl: `sqlite:${file}`,
        loadSeconds: loaded?.seconds,
        loadPhases: loaded?.phases.record(),
        async isolate(name) {
          const copy = join(workDir, `${size.label}-${name}.db`);
          removeSqlite(copy);
          copyFileSync(file, copy);
          const drop = registerCleanup(() => removeSqlite(copy));
          const countCreated = async (prefix: string) =>
            sqliteCount(copy, 'url_mappings WHERE code >= ? AND code < ?', [prefix, prefixEnd(prefix)]);
          const unfoldedVisits = async () => sqliteCount(copy, NOT_FOLDED);
          const vacuum = async () => [];
          const openTransactions = async () => 0;
          return { databaseUrl: `sqlite:${copy}`, countCreated, unfoldedVisits, vacuum, openTransactions, drop };
        },
      };
    },
  };
}

/** A connected client of `connectionString`; the caller ends it. */
export async function connectClient(connectionString: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: 5_000 });
  await client.connect();
  return client;
}

export async function withClient<T>(connectionString: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = await connectClient(connectionString);
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

/** Whether PostgreSQL answers at `url` (within a few seconds). */
export async function postgresAnswers(url: string): Promise<string | undefined> {
  try {
    await withClient(url, (client) => client.query('SELECT 1'));
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** With search_path set in the URL, every query of the service lands in `schema`. */
export function urlWithSchema(serverUrl: string, schema: string): string {
  const url = new URL(serverUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}

interface PgStamp extends Fingerprint {
  /** Tables that were empty once loaded: a reset empties them again. */
  readonly emptyTables: readonly string[];
}

async function readPgStamp(client: pg.Client, schema: string): Promise<PgStamp | undefined> {
  const { rows } = await client.query<{ comment: string | null }>(
    `SELECT obj_description(oid, 'pg_namespace') AS comment FROM pg_namespace WHERE nspname = $1`,
    [schema],
  );
  try {
    return rows[0]?.comment ? (JSON.parse(rows[0].comment) as PgStamp) : undefined;
  } catch {
    return undefined;
  }
}

async function emptyTables(client: pg.Client, schema: string): Promise<string[]> {
  const { rows } = await client.query<{ name: string }>(
    `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE'`,
    [schema],
  );
  const empty: string[] = [];
  for (const { name } of rows) {
    const result = await client.query(`SELECT 1 FROM ${schema}."${name}" LIMIT 1`);
    if (result.rowCount === 0) empty.push(name);
  }
  return empty.sort();
}

/** Back to the loaded state: what a previous run created or counted is undone. */
async function resetPostgres(client: pg.Client, schema: string, stamp: PgStamp): Promise<void> {
  const present = new Set(
    (
      await client.query<{ name: string }>(
        `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1`,
        [schema],
      )
    ).rows.map((r) => r.name),
  );
  const toEmpty = stamp.emptyTables.filter((t) => present.has(t)).map((t) => `${schema}."${t}"`);
  if (toEmpty.length > 0) await client.query(`TRUNCATE ${toEmpty.join(', ')}`);
  await client.query(`DELETE FROM ${schema}.url_mappings WHERE code COLLATE "C" >= '1'`);
  await client.query(`UPDATE ${schema}.url_mappings SET click_count = 0 WHERE click_count <> 0`);
  await client.query(`VACUUM ANALYZE ${schema}.url_mappings`);
}

async function loadPgSchema(serverUrl: string, schema: string, size: DatasetSize): Promise<Loaded> {
  await withClient(serverUrl, async (client) => {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.query(`CREATE SCHEMA ${schema}`);
  });
  const databaseUrl = urlWithSchema(serverUrl, schema);
  const phases = new LoadPhases();
  const seconds = await timed(async () => {
    await phases.time('migrate', () => migrate(databaseUrl));
    await withClient(databaseUrl, async (client) => {
      await loadPostgres(client, size.mappings, () => connectClient(databaseUrl), phases);
      const stamp: PgStamp = { ...fingerprintOf(size), emptyTables: await emptyTables(client, schema) };
      await client.query(`COMMENT ON SCHEMA ${schema} IS '${JSON.stringify(stamp).replace(/'/g, "''")}'`);
    });
  });
  return { seconds, phases };
}

/**
 * Up to this many mappings, every PostgreSQL target gets a schema of its own, loaded afresh (as
 * every SQLite target gets a copy of its file); above it the targets share the size's schema, as
 * loading it again per target would take minutes. Targets sharing a schema share what runs on it:
 * their consumers take each other's events and their visit folds each other's segments.
 */
const PG_ISOLATED_UP_TO = 100_000;

/** `SELECT count(*) FROM <from>` at `databaseUrl` (`from`: a table, and its WHERE if any). */
function pgCount(databaseUrl: string, from = 'url_mappings', params: unknown[] = []): Promise<number> {
  return withClient(databaseUrl, async (client) => {
    const { rows } = await client.query<{ n: string }>(`SELECT count(*) AS n FROM ${from}`, params);
    return Number(rows[0]?.n ?? 0);
  });
}

/** The rows of visits not folded yet: journal rows and unfolded segments (both backends' SQL). */
const NOT_FOLDED = '(SELECT 1 AS one FROM visit_journal UNION ALL SELECT 1 FROM visit_unfolded) AS waiting';

/** What the bench says of a PostgreSQL that runs without autovacuum (undefined: it runs with it). */
export async function autovacuumNote(databaseUrl: string): Promise<string | undefined> {
  const { rows } = await withClient(databaseUrl, (client) => client.query<{ autovacuum: string }>('SHOW autovacuum'));
  return rows[0]?.autovacuum === 'off'
    ? "PostgreSQL runs with autovacuum off: after each run the bench vacuums the target's tables autovacuum would vacuum (its CPU counted in the run's database CPU)"
    : undefined;
}

/**
 * VACUUM of the tables of `databaseUrl`'s schema that autovacuum would vacuum now, when the
 * server's autovacuum is off: the service's queue-like tables (the visit journal, unfolded segments, click deltas, the
 * day rows it rewrites) would otherwise grow dead rows through a whole bench run, which no server
 * with autovacuum on (PostgreSQL's default) lets happen, and later runs would pay for earlier ones.
 */
async function vacuumWithoutAutovacuum(databaseUrl: string): Promise<string[]> {
  return withClient(databaseUrl, async (client) => {
    const { rows: setting } = await client.query<{ autovacuum: string }>('SHOW autovacuum');
    if (setting[0]?.autovacuum !== 'off') return [];
    // Autovacuum's own rule: dead rows past autovacuum_vacuum_threshold + scale_factor × live rows
    // (a table of 10,000,000 mappings with a few thousand click counts rewritten is left alone:
    // vacuuming it reads every index whole, seconds of CPU no deployment would spend).
    const { rows } = await client.query<{ name: string }>(
      `SELECT relname AS name FROM pg_stat_user_tables
       WHERE schemaname = current_schema()
         AND n_dead_tup > current_setting('autovacuum_vacuum_threshold')::float8
           + current_setting('autovacuum_vacuum_scale_factor')::float8 * n_live_tup
       ORDER BY relname`,
    );
    for (const { name } of rows) await client.query(`VACUUM "${name}"`);
    return rows.map((r) => r.name);
  });
}

/**
 * Transactions open now on the server of `databaseUrl` on the connections named `applicationName`
 * (`TargetData.openTransactions`). A statement running outside a transaction counts too: it is one
 * while it runs.
 */
export function openTransactionsOf(databaseUrl: string, applicationName: string): Promise<number> {
  return pgCount(databaseUrl, 'pg_stat_activity WHERE application_name = $1 AND xact_start IS NOT NULL', [
    applicationName,
  ]);
}

/** A PostgreSQL target's data at `databaseUrl` (a schema in its search_path). */
function postgresTarget(databaseUrl: string, drop: () => Promise<void>): TargetData {
  const countCreated = (prefix: string) =>
    // In byte order whatever the database's collation (a C collation also uses the index).
    pgCount(databaseUrl, 'url_mappings WHERE code COLLATE "C" >= $1 AND code COLLATE "C" < $2', [
      prefix,
      prefixEnd(prefix),
    ]);
  const unfoldedVisits = () => pgCount(databaseUrl, NOT_FOLDED);
  const vacuum = () => vacuumWithoutAutovacuum(databaseUrl);
  const openTransactions = (applicationName: string) => openTransactionsOf(databaseUrl, applicationName);
  return { databaseUrl, countCreated, unfoldedVisits, vacuum, openTransactions, drop };
}

/**
 * PostgreSQL datasets: a schema per size on `serverUrl`'s database, kept for the next run; small
 * ones loaded again into a schema per target (PG_ISOLATED_UP_TO).
 */
export function postgresBackend(serverUrl: string, schemaPrefix = 'bench_data'): StorageBackend {
  const parsed = new URL(serverUrl);
  return {
    name: 'postgres',
    where: `${parsed.hostname}:${parsed.port || 5432}${parsed.pathname}`,
    async open(size, log) {
      const schema = `${schemaPrefix}_${size.label}`;
      const databaseUrl = urlWithSchema(serverUrl, schema);
      const stamp = await withClient(serverUrl, (client) => readPgStamp(client, schema));
      let loaded: Loaded | undefined;
      if (sameFingerprint(stamp, fingerprintOf(size))) {
        log(`reusing schema ${schema}`);
        await migrate(databaseUrl);
        await withClient(serverUrl, (client) => resetPostgres(client, schema, stamp!));
      } else {
        log(`loading ${size.mappings.toLocaleString('en-US')} mappings into schema ${schema}`);
        loaded = await loadPgSchema(serverUrl, schema, size);
      }
      const count = await pgCount(databaseUrl);
      if (count !== size.mappings) {
        throw new Error(
          `schema ${schema} holds ${count} rows, expected ${size.mappings}: DROP SCHEMA ${schema} CASCADE`,
        );
      }
      const shared = postgresTarget(databaseUrl, async () => {});
      const isolate = async (name: string): Promise<TargetData> => {
        if (size.mappings > PG_ISOLATED_UP_TO) return shared;
        // A schema of its own, loaded the same way (a second or two at this size): no other
        // target's consumers, fold or created rows in it.
        const own = `${schema}_${name.replace(/[^a-z0-9]/gi, '_').toLowerCase()}`;
        await loadPgSchema(serverUrl, own, size);
        const drop = registerCleanup(() =>
          withClient(serverUrl, (client) => client.query(`DROP SCHEMA IF EXISTS ${own} CASCADE`)).then(() => {}),
        );
        return postgresTarget(urlWithSchema(serverUrl, own), drop);
      };
      return {
        backend: 'postgres',
        size,
        databaseUrl,
        loadSeconds: loaded?.seconds,
        loadPhases: loaded?.phases.record(),
        isolate,
      };
    },
  };
}
