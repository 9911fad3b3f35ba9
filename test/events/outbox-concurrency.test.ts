/**
 * Concurrent writers across two service processes (the built service, `serve --role api`) on one
 * PostgreSQL database and the shared NATS: every `POST /shorten` answered 201 has exactly one
 * `url.created` event in the JetStream stream once the outbox has drained. The relay once deleted
 * a range of ids, so a row that committed after a higher one was deleted unpublished (issue 11).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { connect as natsConnect } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgres, type TestDatabase } from '../helpers/backends.js';
import {
  census,
  CENSUS_ENV,
  createdInStream,
  outboxEmptied,
  shortenLoad,
  type LoadResult,
} from '../helpers/outbox-census.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { inCi, NATS_URL, natsAvailable } from '../helpers/services.js';

const ROOT = join(import.meta.dirname, '..', '..');
const REQUESTS = 3000;
const CONCURRENCY = 32;

/** Whether dist/cli.js is there; in CI its absence fails. */
export function builtServiceAvailable(): boolean {
  if (existsSync(join(ROOT, 'dist', 'cli.js'))) return true;
  const message = 'dist/cli.js is missing: run `npm run build` first (npm test does)';
  if (inCi) throw new Error(message);
  console.warn(`skipping: ${message}`);
  return false;
}

async function deleteStreams(prefix: string): Promise<void> {
  const nc = await natsConnect({ servers: NATS_URL.replace(/^nats:\/\//, '') });
  try {
    const jsm = await nc.jetstreamManager();
    const names: string[] = [];
    for await (const info of jsm.streams.list()) if (info.config.name.startsWith(prefix)) names.push(info.config.name);
    for (const name of names) await jsm.streams.delete(name);
  } finally {
    await nc.close();
  }
}

describe('the outbox under concurrent writers in two processes (PostgreSQL, NATS)', async () => {
  const ready = postgres.available && (await natsAvailable()) && builtServiceAvailable();
  const prefix = `toc${randomBytes(4).toString('hex')}_`;
  let database: TestDatabase | undefined;
  const processes: ServerProcess[] = [];

  beforeAll(async () => {
    if (!ready) return;
    database = await postgres.create();
    const env = { ...CENSUS_ENV, DATABASE_URL: database.databaseUrl, NATS_URL, NATS_PREFIX: prefix };
    // One after the other: the first runs the migrations.
    processes.push(await startServer(env, ['serve', '--role', 'api']));
    processes.push(await startServer(env, ['serve', '--role', 'api']));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop('SIGTERM')));
    if (!ready) return;
    await database?.drop();
    await deleteStreams(prefix);
  }, 30_000);

  it.skipIf(!ready)(
    `${REQUESTS} creates at concurrency ${CONCURRENCY}: each acknowledged code has exactly one event on the broker`,
    async () => {
      const load: LoadResult = await shortenLoad(
        processes.map((p) => p.url),
        REQUESTS,
        CONCURRENCY,
      );
      expect([...load.refused], 'every create is acknowledged').toEqual([]);
      expect(await outboxEmptied(database!.databaseUrl, 60_000), 'rows left in the outbox').toBe(0);
      const result = census(load.acknowledged, await createdInStream(NATS_URL, prefix));
      expect({ missing: result.missing.length, duplicated: result.duplicated.length }).toEqual({
        missing: 0,
        duplicated: 0,
      });
      expect(result.found).toBe(REQUESTS);
    },
    180_000,
  );
});
