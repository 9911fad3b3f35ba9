/**
 * `GET /urls?q=` at scale: loads (or reuses) N seeded mappings per backend, then times the
 * repository's search — the statement the service runs — with a few kinds of `q`, one page of 20
 * each, in id order and newest first; and, without `q`, a keyset page deep in `created_at` order
 * (every seeded mapping has the same instant, so that page lies among millions of ties). Not part
 * of `npm test` (it loads 10,000,000 rows).
 *
 *   node --import tsx bench/search.ts                     # both backends, 10,000,000 mappings
 *   SEARCH_BENCH_MAPPINGS=100000 SEARCH_BENCH_BACKENDS=sqlite node --import tsx bench/search.ts
 *
 * The data is loaded the way an existing installation gets it: the tables as the migrations
 * before 0060 left them, filled by bench/lib/seed.ts, then the migrations that add owners and
 * the search index run over the loaded rows (their duration is printed too). SQLite keeps its
 * file in BENCH_DATA_DIR (bench/.data/search-<n>.db), PostgreSQL a schema `bench_search_<n>` in
 * the test database; both are reused while they hold N rows.
 */
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { type Migration, sql } from 'kysely';
import { loadConfig } from '../src/config/loader.js';
import { type Database, type Dialect, openDatabase } from '../src/adapters/storage/database.js';
import { KyselyUrlMappingRepository } from '../src/adapters/storage/kysely-url-mapping-repository.js';
import { migrateToLatest, migratorFor } from '../src/adapters/storage/migrations.js';
import { migrationsFor } from '../src/adapters/storage/migrations/index.js';
import type { ListOptions } from '../src/ports/url-mapping-repository.js';
import { seedMapping } from './lib/codes.js';
import { connectClient, withClient } from './lib/datasets.js';
import { ROOT } from './lib/processes.js';
import { loadPostgres, loadSqlite } from './lib/seed.js';
import { TEST_DATABASE_URL } from './lib/settings.js';

const MAPPINGS = Number(process.env.SEARCH_BENCH_MAPPINGS ?? 10_000_000);
const BACKENDS = (process.env.SEARCH_BENCH_BACKENDS ?? 'sqlite,postgres').split(',');
const DATA_DIR = process.env.BENCH_DATA_DIR?.trim() || join(ROOT, 'bench', '.data');
const POSTGRES_URL = process.env.SEARCH_BENCH_POSTGRES_URL ?? TEST_DATABASE_URL;
/** Timed runs of each query after one warm-up run. */
const RUNS = 15;
const TARGET_MS = 50;

const log = (text: string) => console.log(`[search-bench] ${text}`);

async function timed<T>(work: () => Promise<T> | T): Promise<[T, number]> {
  const start = performance.now();
  const result = await work();
  return [result, performance.now() - start];
}

/** The migrations an installation had before this search existed (up to 0052). */
function before0060(dialect: Dialect): Record<string, Migration> {
  return Object.fromEntries(Object.entries(migrationsFor(dialect)).filter(([name]) => name < '0060'));
}

async function migrateBefore0060(database: Database): Promise<void> {
  const { error } = await (
    await migratorFor(database.db, database.dialect, before0060(database.dialect))
  ).migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
}

async function count(database: Database): Promise<number> {
  const row = await database.db
    .selectFrom('url_mappings')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

async function openSqlite(): Promise<Database> {
  mkdirSync(DATA_DIR, { recursive: true });
  const file = join(DATA_DIR, `search-${MAPPINGS}.db`);
  let database = openAt(`sqlite:${file}`);
  if (existsSync(file) && (await count(database).catch(() => 0)) === MAPPINGS) {
    log(`sqlite: reusing ${file}`);
  } else {
    await database.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
    database = openAt(`sqlite:${file}`);
    await migrateBefore0060(database);
    await database.close();
    const [, ms] = await timed(() => loadSqlite(file, MAPPINGS));
    log(`sqlite: loaded ${MAPPINGS.toLocaleString('en-US')} mappings in ${(ms / 1000).toFixed(1)} s`);
    database = openAt(`sqlite:${file}`);
  }
  return database;
}

async function openPostgres(): Promise<Database> {
  const schema = `bench_search_${MAPPINGS}`;
  const url = new URL(POSTGRES_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  const open = () => openAt(url.toString());
  const existing = await withClient(POSTGRES_URL, async (client) => {
    const { rows } = await client.query(`SELECT 1 FROM pg_namespace WHERE nspname = $1`, [schema]);
    return rows.length > 0;
  });
  let database = open();
  if (existing && (await count(database).catch(() => 0)) === MAPPINGS) {
    log(`postgres: reusing schema ${schema}`);
    return database;
  }
  await database.close();
  await withClient(POSTGRES_URL, async (client) => {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.query(`CREATE SCHEMA ${schema}`);
  });
  database = open();
  await migrateBefore0060(database);
  const [, ms] = await timed(() =>
    withClient(url.toString(), (client) => loadPostgres(client, MAPPINGS, () => connectClient(url.toString()))),
  );
  log(`postgres: loaded ${MAPPINGS.toLocaleString('en-US')} mappings in ${(ms / 1000).toFixed(1)} s`);
  return database;
}

interface Query {
  readonly label: string;
  readonly options: ListOptions;
}

/** A few kinds of search: one row, a handful, many, none; two orders. */
function queries(): Query[] {
  const rare = seedMapping(Math.floor(MAPPINGS / 3)).code;
  const part = seedMapping(Math.floor(MAPPINGS / 7)).code.slice(2, 6);
  const newest = { field: 'created_at', descending: true } as const;
  const oldest = { field: 'created_at', descending: false } as const;
  // Every seeded mapping has one created_at: a keyset page lies among millions of ties.
  const middle = Math.floor(MAPPINGS / 2);
  const late = Math.floor((MAPPINGS * 9) / 10);
  return [
    { label: `q whole code (${rare})`, options: { q: rare, limit: 21 } },
    { label: `q whole code, newest first`, options: { q: rare, limit: 21, sort: newest } },
    { label: `q 4 characters of a code (${part})`, options: { q: part, limit: 21 } },
    { label: `q 4 characters, newest first`, options: { q: part, limit: 21, sort: newest } },
    { label: 'q no match (zzzzzzq)', options: { q: 'zzzzzzq', limit: 21 } },
    { label: 'q in every URL (seeded), first page', options: { q: 'seeded', limit: 21 } },
    { label: `no q, newest first, after id ${middle}`, options: { limit: 21, after: middle, sort: newest } },
    { label: `no q, oldest first, after id ${late}`, options: { limit: 21, after: late, sort: oldest } },
  ];
}

const openAt = (databaseUrl: string): Database =>
  openDatabase(loadConfig({ DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent' }).database);

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function measure(name: string, database: Database): Promise<void> {
  const [, migrateMs] = await timed(() => migrateToLatest(database.db, database.dialect));
  log(`${name}: migrations 0060 to 0062 over the loaded rows (or nothing, reused): ${(migrateMs / 1000).toFixed(1)} s`);
  await sql`ANALYZE url_mappings`.execute(database.db);
  const repo = new KyselyUrlMappingRepository(database.db, database.dialect);
  for (const { label, options } of queries()) {
    const [rows] = await timed(() => repo.list(options));
    const times: number[] = [];
    for (let i = 0; i < RUNS; i++) times.push((await timed(() => repo.list(options)))[1]);
    const p50 = median(times);
    const max = Math.max(...times);
    const verdict = p50 < TARGET_MS ? 'PASS' : 'OVER';
    log(
      `${name} ${MAPPINGS.toLocaleString('en-US')}: ${label}: ${rows.length} rows, median ${p50.toFixed(2)} ms, max ${max.toFixed(2)} ms [${verdict} < ${TARGET_MS} ms]`,
    );
  }
}

async function main(): Promise<void> {
  for (const backend of BACKENDS) {
    const database = backend === 'postgres' ? await openPostgres() : await openSqlite();
    try {
      await measure(backend, database);
    } finally {
      await database.close();
    }
  }
}

await main();
