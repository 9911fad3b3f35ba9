/**
 * Databases holding N mappings, made fresh for a run: the service's own migrations create the
 * table, then rows are bulk-inserted directly (far faster than through the API).
 */
import { copyFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { registerCleanup } from './cleanup.js';
import { type Mapping, seedMapping } from './codes.js';
import { runNode } from './processes.js';
import type { DatasetSize } from './settings.js';

export type BackendName = 'sqlite' | 'postgres';

export interface Dataset {
  readonly backend: BackendName;
  readonly size: DatasetSize;
  /** The service's DATABASE_URL for this dataset. */
  readonly databaseUrl: string;
  readonly seedSeconds: number;
  countRows(): Promise<number>;
  drop(): Promise<void>;
  /**
   * A private copy of the seeded data for one service process, when the backend can make one
   * cheaply (SQLite: a file copy). Every service runs its event consumers and click flushes
   * against its database: on a shared one, the process that holds the consumers' leases does the
   * others' background work too, and they contend for SQLite's one write lock, so which variant
   * was started first would show in its numbers.
   */
  isolate?(name: string): IsolatedCopy;
}

export interface IsolatedCopy {
  readonly databaseUrl: string;
  countRows(): Promise<number>;
  drop(): Promise<void>;
}

export interface StorageBackend {
  readonly name: BackendName;
  create(size: DatasetSize): Promise<Dataset>;
}

const PG_BATCH = 50_000;

function migrate(databaseUrl: string): Promise<void> {
  return runNode(['dist/cli.js', 'migrate'], { DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' });
}

function mappings(from: number, to: number): Mapping[] {
  return Array.from({ length: to - from }, (_, i) => seedMapping(from + i));
}

async function timed(work: () => Promise<void> | void): Promise<number> {
  const start = performance.now();
  await work();
  return (performance.now() - start) / 1000;
}

function seedSqlite(file: string, count: number): void {
  const db = new SQLite(file);
  try {
    db.pragma('synchronous = OFF');
    const insert = db.prepare('INSERT INTO url_mappings (code, url, created_at, click_count) VALUES (?, ?, ?, ?)');
    db.transaction(() => {
      for (let i = 0; i < count; i++) {
        const m = seedMapping(i);
        insert.run(m.code, m.url, m.created_at, m.click_count);
      }
    })();
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
}

function countSqliteRows(file: string): number {
  const db = new SQLite(file, { readonly: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM url_mappings').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

/** SQLite datasets are files in `dir`. */
export function sqliteBackend(dir: string): StorageBackend {
  return {
    name: 'sqlite',
    async create(size) {
      const file = join(dir, `${size.label}.db`);
      const drop = registerCleanup(() => {
        for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
      });
      const databaseUrl = `sqlite:${file}`;
      await migrate(databaseUrl);
      const seedSeconds = await timed(() => seedSqlite(file, size.mappings));
      const isolate = (name: string): IsolatedCopy => {
        const copy = `${file}.${name}.db`;
        copyFileSync(file, copy);
        const dropCopy = registerCleanup(() => {
          for (const suffix of ['', '-wal', '-shm']) rmSync(`${copy}${suffix}`, { force: true });
        });
        return { databaseUrl: `sqlite:${copy}`, countRows: async () => countSqliteRows(copy), drop: dropCopy };
      };
      return {
        backend: 'sqlite',
        size,
        databaseUrl,
        seedSeconds,
        countRows: async () => countSqliteRows(file),
        drop,
        isolate,
      };
    },
  };
}

async function withClient<T>(connectionString: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

async function seedPostgres(databaseUrl: string, count: number): Promise<void> {
  await withClient(databaseUrl, async (client) => {
    for (let from = 0; from < count; from += PG_BATCH) {
      const batch = mappings(from, Math.min(count, from + PG_BATCH));
      await client.query(
        `INSERT INTO url_mappings (code, url, created_at, click_count)
         SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::bigint[])`,
        [
          batch.map((m) => m.code),
          batch.map((m) => m.url),
          batch.map((m) => m.created_at),
          batch.map((m) => m.click_count),
        ],
      );
    }
    await client.query('ANALYZE url_mappings');
  });
}

/** With search_path set in the URL, every query of the service lands in `schema`. */
function urlWithSchema(serverUrl: string, schema: string): string {
  const url = new URL(serverUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}

/** PostgreSQL datasets are schemas of their own on `serverUrl`'s database, dropped afterwards. */
export function postgresBackend(serverUrl: string): StorageBackend {
  return {
    name: 'postgres',
    async create(size) {
      const schema = `bench_${process.pid}_${size.label}`;
      await withClient(serverUrl, (client) => client.query(`CREATE SCHEMA ${schema}`));
      const drop = registerCleanup(() =>
        withClient(serverUrl, async (client) => void (await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`))),
      );
      const databaseUrl = urlWithSchema(serverUrl, schema);
      await migrate(databaseUrl);
      const seedSeconds = await timed(() => seedPostgres(databaseUrl, size.mappings));
      const countRows = () =>
        withClient(databaseUrl, async (client) => {
          const { rows } = await client.query<{ n: string }>('SELECT count(*) AS n FROM url_mappings');
          return Number(rows[0]?.n ?? 0);
        });
      return { backend: 'postgres', size, databaseUrl, seedSeconds, countRows, drop };
    },
  };
}
