/**
 * `POST /shorten` from concurrent writers into two serving processes of the built service on one
 * database (SQLite: `--workers 2` on one file; PostgreSQL: two `serve` processes), where creates
 * arriving together share one transaction (src/adapters/storage/batched-creates.ts): every
 * acknowledged create is stored once with exactly one `url.created` event, a code posted many
 * times at once is taken once (409 for the others), and with the database failing under load
 * (SQLite: another process holds the write lock past the busy timeout; PostgreSQL: this test's
 * own connections ended) every answer is 201 or 503, nothing acknowledged is lost, and what was
 * refused with 503 is not stored (SQLite; PostgreSQL cannot tell a commit whose answer was lost,
 * its groups are checked in test/events/batched-creates.test.ts) nor has an event.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/adapters/storage/database.js';
import { BACKENDS, type TestDatabase, testConfig } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import {
  CENSUS_ENV,
  census,
  createdInLog,
  createdInStore,
  logHoles,
  postCode,
  shortenLoad,
  terminateConnections,
} from '../helpers/outbox-census.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { holdWriteLock } from '../helpers/storage.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const UNAVAILABLE = JSON.stringify({ detail: 'Database unavailable' });

async function storedCodes(databaseUrl: string): Promise<Set<string>> {
  const database = openDatabase(testConfig(databaseUrl).database);
  try {
    const rows = await database.db.selectFrom('url_mappings').select('code').execute();
    return new Set(rows.map((row) => row.code));
  } finally {
    await database.close();
  }
}

const post = postCode;

describe.each(BACKENDS)('POST /shorten from concurrent writers into two processes on $name', (backend) => {
  let database: TestDatabase;
  let servers: ServerProcess[] = [];
  let targets: string[] = [];
  const applicationName = `i13w_${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    if (!backend.available) return;
    database = await backend.create();
    if (backend.name === 'sqlite') {
      // A process's statements outside a transaction wait for the SQLite write lock synchronously
      // (the busy timeout; its transactions wait on timers), so the requests meanwhile on its
      // connections could take longer than the default 10 s to arrive (408): these runs are about
      // writes, not slow clients.
      const server = await startServer({
        ...CENSUS_ENV,
        DATABASE_URL: database.databaseUrl,
        WORKERS: '2',
        REQUEST_TIMEOUT_MS: '120000',
        HEADERS_TIMEOUT_MS: '120000',
        // Idle keep-alive connections closed after a blocked stretch race the client's next request on them.
        KEEP_ALIVE_TIMEOUT_MS: '120000',
      });
      await eventually(() => server.output().split('Server listening at').length - 1 === 2, { timeoutMs: 20_000 });
      servers = [server];
    } else {
      const url = new URL(database.databaseUrl);
      url.searchParams.set('application_name', applicationName);
      const env = { ...CENSUS_ENV, DATABASE_URL: url.toString() };
      servers = [await startServer(env), await startServer(env)];
    }
    targets = servers.map((s) => s.url);
  }, 60_000);
  afterAll(async () => {
    for (const server of servers) await server.stop('SIGKILL');
    await database?.drop();
  });

  /** Every code of `acknowledged` stored, with exactly one `url.created` event in the log and, in time, in the event store. */
  async function expectStoredWithOneEvent(acknowledged: readonly string[]) {
    const stored = await storedCodes(database.databaseUrl);
    expect(acknowledged.filter((code) => !stored.has(code))).toEqual([]);
    const logged = census(acknowledged, await createdInLog(database.databaseUrl));
    expect({ missing: logged.missing, duplicated: logged.duplicated }).toEqual({ missing: [], duplicated: [] });
    expect(await logHoles(database.databaseUrl, 'url_events')).toEqual([]);
    const kept = await eventually(
      async () => {
        const counted = census(acknowledged, await createdInStore(database.databaseUrl));
        if (counted.missing.length > 0) throw new Error(`${counted.missing.length} events not in the event store yet`);
        return counted;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(kept.duplicated).toEqual([]);
  }

  it.skipIf(!backend.available)(
    'stores every acknowledged create once with one event; a code posted at once through both is taken once',
    async () => {
      const load = shortenLoad(targets, 800, 64);
      // Meanwhile, each of 6 codes posted 8 times at once, through both processes.
      const contested = Array.from({ length: 6 }, (_, i) => `same${randomBytes(2).toString('hex')}${i}`);
      const answers = await Promise.all(
        contested.map((code) =>
          Promise.all(Array.from({ length: 8 }, (_, k) => post(targets[k % targets.length]!, code))),
        ),
      );
      const { acknowledged, refused } = await load;
      expect([...refused.entries()]).toEqual([]);
      expect(acknowledged).toHaveLength(800);
      for (const forCode of answers) {
        expect(forCode.map((a) => a.status).sort()).toEqual([201, 409, 409, 409, 409, 409, 409, 409]);
      }
      await expectStoredWithOneEvent([...acknowledged, ...contested]);
    },
    90_000,
  );

  it.skipIf(!backend.available)(
    'with the database failing under load: 201 or 503 only, every 201 stored with its event, no 503 stored',
    async () => {
      const prefix = `f${randomBytes(2).toString('hex')}`; // codes of 10 characters at most
      const outcomes = new Map<string, { status: number; text: string }>();
      let next = 0;
      let stop = false;
      const client = async () => {
        while (!stop) {
          const code = `${prefix}${String(next++).padStart(5, '0')}`;
          outcomes.set(
            code,
            await post(targets[next % targets.length]!, code).catch((e: Error) => ({ status: 0, text: e.message })),
          );
        }
      };
      const load = Promise.all(Array.from({ length: 48 }, client));
      await sleep(500);
      let fault: string;
      if (backend.name === 'sqlite') {
        // Held until a create is refused for it: the busy timeout (5 s) passes for every write
        // transaction that waits, and a group commit tries again (with savepoints) once.
        const lock = holdWriteLock(database.databaseUrl);
        const since = performance.now();
        await eventually(() => [...outcomes.values()].some(({ status }) => status === 503), {
          timeoutMs: 120_000,
          intervalMs: 100,
        });
        lock.release();
        fault = `another process held the write lock for ${((performance.now() - since) / 1000).toFixed(0)} s`;
      } else {
        const ended: number[] = [];
        for (let round = 0; round < 3; round++) {
          await sleep(700);
          ended.push(await terminateConnections(applicationName));
        }
        expect(ended.reduce((a, b) => a + b, 0)).toBeGreaterThan(3);
        fault = `pg_terminate_backend x3 (${ended.join('+')} connections)`;
      }
      // Service resumes: new creates are acknowledged again.
      await eventually(
        async () => (await post(targets[0]!, `${prefix}r${randomBytes(2).toString('hex')}`)).status === 201,
        {
          timeoutMs: 30_000,
          intervalMs: 50,
        },
      );
      await sleep(300);
      stop = true;
      await load;

      const statuses = new Map<number, number>();
      for (const { status } of outcomes.values()) statuses.set(status, (statuses.get(status) ?? 0) + 1);
      const others = [...outcomes.values()].filter(({ status }) => status !== 201 && status !== 503);
      expect(others.slice(0, 3)).toEqual([]); // (a few, with their messages, when there are any)
      expect(statuses.get(503) ?? 0).toBeGreaterThan(0);
      const refused = [...outcomes].filter(([, a]) => a.status === 503);
      for (const [, answer] of refused) expect(answer.text).toBe(UNAVAILABLE);
      const acknowledged = [...outcomes].filter(([, a]) => a.status === 201).map(([code]) => code);
      await expectStoredWithOneEvent(acknowledged);

      const stored = await storedCodes(database.databaseUrl);
      const logged = await createdInLog(database.databaseUrl);
      const refusedButStored = refused.map(([code]) => code).filter((code) => stored.has(code));
      // Stored and logged go together, whatever the answer was.
      for (const code of refusedButStored) expect(logged.get(code) ?? []).toHaveLength(1);
      if (backend.name === 'sqlite') expect(refusedButStored).toEqual([]);
      for (const code of refused.map(([c]) => c)) if (!stored.has(code)) expect(logged.get(code)).toBeUndefined();
      for (const server of servers) expect(server.child.exitCode).toBeNull();
      console.info(
        `${backend.name}, ${fault}, 48 concurrent writers into two processes: ${JSON.stringify(Object.fromEntries(statuses))}; ` +
          `every 201 stored with one event; 503s stored anyway (commit whose answer was lost): ${refusedButStored.length}`,
      );
    },
    240_000,
  );
});
