/**
 * Concurrent writers across two service processes (the built service) on one database: every
 * `POST /shorten` answered 201 has exactly one `url.created` event on the bus once the outbox has
 * drained. With NATS (two `serve --role api` on PostgreSQL) the checker reads the JetStream
 * stream: the relay once deleted a range of ids, so a row that committed after a higher one was
 * deleted unpublished (issue 11). With the embedded bus (two `serve` processes, each also running
 * the consumers, on PostgreSQL and on one SQLite file) it reads the log, checks that each
 * partition's offsets are contiguous, and that the event store group, shared by both processes,
 * skipped none.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Backend, postgres, sqlite, type TestDatabase } from '../helpers/backends.js';
import {
  census,
  CENSUS_ENV,
  type CreatedByCode,
  createdInLog,
  createdInStore,
  createdInStream,
  logHoles,
  outboxEmptied,
  shortenLoad,
} from '../helpers/outbox-census.js';
import { eventually } from '../helpers/eventually.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { inCi, NATS_URL, natsAvailable } from '../helpers/services.js';
import { deleteNatsStreams } from '../helpers/nats.js';

const ROOT = join(import.meta.dirname, '..', '..');
const REQUESTS = 3000;
const CONCURRENCY = 32;

/** Whether dist/cli.js is there; in CI its absence fails. */
function builtServiceAvailable(): boolean {
  if (existsSync(join(ROOT, 'dist', 'cli.js'))) return true;
  const message = 'dist/cli.js is missing: run `npm run build` first (npm test does)';
  if (inCi) throw new Error(message);
  console.warn(`skipping: ${message}`);
  return false;
}

interface Variant {
  readonly name: string;
  readonly backend: Backend;
  readonly nats: boolean;
}
const VARIANTS: Variant[] = [
  { name: 'NATS on postgres', backend: postgres, nats: true },
  { name: 'the embedded bus on postgres', backend: postgres, nats: false },
  { name: 'the embedded bus on one sqlite file', backend: sqlite, nats: false },
];
const natsUp = await natsAvailable();
const built = builtServiceAvailable();

describe.each(VARIANTS)('the outbox under concurrent writers in two processes, $name', (variant) => {
  const ready = variant.backend.available && (!variant.nats || natsUp) && built;
  const prefix = `toc${randomBytes(4).toString('hex')}_`;
  let database: TestDatabase | undefined;
  const processes: ServerProcess[] = [];

  beforeAll(async () => {
    if (!ready) return;
    database = await variant.backend.create();
    const bus: Record<string, string> = variant.nats ? { NATS_URL, NATS_PREFIX: prefix } : { EVENT_POLL_MS: '50' };
    const env = { ...CENSUS_ENV, DATABASE_URL: database.databaseUrl, ...bus };
    // With NATS, API instances only; embedded, each process also runs the consumers (event store).
    const args = variant.nats ? ['serve', '--role', 'api'] : ['serve'];
    // One after the other: the first runs the migrations.
    processes.push(await startServer(env, args));
    processes.push(await startServer(env, args));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop('SIGTERM')));
    if (!ready) return;
    await database?.drop();
    if (variant.nats) await deleteNatsStreams(prefix);
  }, 30_000);

  /** The events the bus holds, per code, once nothing waits any longer. */
  async function createdOnTheBus(): Promise<CreatedByCode> {
    const url = database!.databaseUrl;
    if (!variant.nats) return createdInLog(url);
    expect(await outboxEmptied(url, 60_000), 'rows left in the outbox').toBe(0);
    return createdInStream(NATS_URL, prefix);
  }

  it.skipIf(!ready)(
    `${REQUESTS} creates at concurrency ${CONCURRENCY}: each acknowledged code has exactly one event on the bus`,
    async () => {
      const load = await shortenLoad(
        processes.map((p) => p.url),
        REQUESTS,
        CONCURRENCY,
      );
      expect([...load.refused], 'every create is acknowledged').toEqual([]);
      const result = census(load.acknowledged, await createdOnTheBus());
      expect({ missing: result.missing.length, duplicated: result.duplicated.length }).toEqual({
        missing: 0,
        duplicated: 0,
      });
      expect(result.found).toBe(REQUESTS);
      if (variant.nats) return;
      expect(await logHoles(database!.databaseUrl, 'url_events')).toEqual([]);
      // The event store group, its partitions shared by both processes, skipped nothing.
      await eventually(
        async () => {
          const stored = census(load.acknowledged, await createdInStore(database!.databaseUrl));
          expect({ missing: stored.missing.length, duplicated: stored.duplicated.length }).toEqual({
            missing: 0,
            duplicated: 0,
          });
        },
        { timeoutMs: 60_000, intervalMs: 500 },
      );
    },
    180_000,
  );
});
