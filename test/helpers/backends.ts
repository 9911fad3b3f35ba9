import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { loadConfig, type Config } from '../../src/config/config.js';
import { POSTGRES_URL, postgresAvailable } from './services.js';

/** A fresh, empty database of one kind, and how to throw it away. */
export interface TestDatabase {
  readonly databaseUrl: string;
  drop(): Promise<void>;
}

export interface Backend {
  readonly name: 'sqlite' | 'postgres';
  readonly available: boolean;
  create(): Promise<TestDatabase>;
}

export const sqlite: Backend = {
  name: 'sqlite',
  available: true,
  async create() {
    const dir = mkdtempSync(join(tmpdir(), 'urlshortener-test-'));
    return {
      databaseUrl: `sqlite:${join(dir, 'test.db')}`,
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  },
};

/** Each PostgreSQL test database is a schema of its own in the `test` database, so files can run in parallel. */
export const postgres: Backend = {
  name: 'postgres',
  available: postgresAvailable,
  async create() {
    const schema = `t_${randomBytes(6).toString('hex')}`;
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    await admin.query(`CREATE SCHEMA ${schema}`);
    await admin.end();
    const url = new URL(POSTGRES_URL);
    url.searchParams.set('options', `-c search_path=${schema}`);
    return {
      databaseUrl: url.toString(),
      drop: async () => {
        const client = new pg.Client({ connectionString: POSTGRES_URL });
        await client.connect();
        await client.query(`DROP SCHEMA ${schema} CASCADE`);
        await client.end();
      },
    };
  },
};

export const BACKENDS: readonly Backend[] = [sqlite, postgres];

/**
 * The configuration a test runs with: defaults, the given database, quiet logs, and no rate
 * limiting (every inject comes from one address); rate-limit tests pass `RATE_LIMIT_ENABLED: 'true'`.
 */
export function testConfig(databaseUrl: string, env: Record<string, string> = {}): Config {
  return loadConfig({ DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent', RATE_LIMIT_ENABLED: 'false', ...env });
}

/**
 * A fresh database of `backend` for a suite whose instances share it: created in a `beforeAll`
 * (when `backend.available` and `when`), dropped in its `afterAll`.
 */
export function useTestDatabase(backend: Backend, when = true): TestDatabase {
  let database: TestDatabase | undefined;
  beforeAll(async () => {
    if (backend.available && when) database = await backend.create();
  });
  afterAll(async () => {
    await database?.drop();
  });
  return {
    get databaseUrl() {
      if (!database)
        throw new Error(`the ${backend.name} test database does not exist (not available, or not created yet)`);
      return database.databaseUrl;
    },
    drop: async () => {
      await database?.drop();
      database = undefined;
    },
  };
}
