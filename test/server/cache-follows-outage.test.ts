/**
 * The cache invalidation consumer while the database fails. Two API processes keep links in their
 * caches for an hour (CACHE_TTL_MS), so only a `url.updated` / `url.deleted` can change what one
 * of them serves. Links are cached on the second (B); the first (A) retargets two thirds of them
 * and deletes the rest, each change sent again after a 503 until it is acknowledged. The checker:
 * every acknowledged change is what B serves within seconds of the database answering it again,
 * not after its TTL.
 * - While the database fails under both (PostgreSQL: their connections dropped every 40 ms for
 *   6 s; SQLite: another process holds the write lock for 6 s). On the embedded bus the events
 *   wait in the database, on NATS in the outbox, until it answers again. On the embedded bus
 *   (SQLite, PostgreSQL) and on NATS JetStream (with PostgreSQL).
 * - While only B is cut off from PostgreSQL (through a TCP proxy that refuses it) and A's changes
 *   all go through: B's embedded-log consumer must resume from its stored position once it
 *   reaches the database again, not from the log's end, or it would miss what A changed meanwhile.
 * The built server (`npm run build`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgres, type TestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { DROP_STORM_MS, FLEET_VARIANTS, useFleet } from '../helpers/fleet.js';
import { send, untilAcknowledged } from '../helpers/http-client.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { postgresBehindProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

const LINKS = 30;
/** The caches follow within this of the database answering again. */
const FOLLOW_MS = 15_000;
const CACHE_ENV = {
  RATE_LIMIT_ENABLED: 'false',
  CACHE_TTL_MS: '3600000',
  EVENT_LEASE_MS: '1000',
  EVENT_POLL_MS: '50',
  NATS_ACK_WAIT_MS: '3000',
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** A database of its own for each suite: the codes need no tag to be new. */
const CODES = Array.from({ length: LINKS }, (_, i) => `cfollow${String(i).padStart(2, '0')}`);
const first = (code: string) => `https://example.com/${code}/v1`;

/** Where `GET /{code}` on `base` sends a client: its `Location`, or the status when it is not a 302. */
async function answerOf(base: string, code: string): Promise<string> {
  const answer = await send(base, 'GET', `/${code}`);
  return answer.status === 302 ? answer.headers.get('location')! : String(answer.status);
}

/** The links created through `a` and cached on `b` (after b's own url.created events, which drop what it held for the codes). */
async function createAndCache(a: string, b: string): Promise<void> {
  for (const code of CODES) {
    const created = await send(a, 'POST', '/shorten', {
      body: { code, url: first(code), created_at: '2024-01-01T00:00:00Z', click_count: 0 },
    });
    expect(created.status, created.text).toBe(201);
  }
  await eventually(
    async () => {
      for (const code of CODES) expect(await answerOf(b, code)).toBe(first(code));
    },
    { timeoutMs: 10_000, intervalMs: 200 },
  );
}

/**
 * Through `a`, a third of the links deleted and the rest retargeted, each change sent until
 * acknowledged: what every process must serve in the end, and how many changes were refused.
 */
async function changeAll(a: string): Promise<{ expected: Map<string, string>; refusals: number }> {
  const expected = new Map<string, string>();
  let refusals = 0;
  for (const [i, code] of CODES.entries()) {
    await sleep(150);
    if (i % 3 === 0) {
      // A DELETE whose commit's answer was lost finds nothing the second time.
      refusals += await untilAcknowledged(
        () => send(a, 'DELETE', `/${code}`),
        (status) => status === 204 || status === 404,
      );
      expected.set(code, '404');
    } else {
      const url = `https://example.com/${code}/v2`;
      refusals += await untilAcknowledged(
        () => send(a, 'PATCH', `/${code}`, { body: { url } }),
        (status) => status === 200,
      );
      expected.set(code, url);
    }
  }
  return { expected, refusals };
}

/** Waits until `b` serves every answer `expected` says (at most FOLLOW_MS); how long that took. */
async function followed(b: string, expected: ReadonlyMap<string, string>): Promise<number> {
  const since = Date.now();
  await eventually(
    async () => {
      const stale: string[] = [];
      for (const [code, answer] of expected) {
        const served = await answerOf(b, code);
        if (served !== answer) stale.push(`${code}: ${served} (not ${answer})`);
      }
      expect(stale).toEqual([]);
    },
    { timeoutMs: FOLLOW_MS, intervalMs: 200 },
  );
  return Date.now() - since;
}

describe.each(FLEET_VARIANTS)('caches that follow changes made while the database fails, on $name', (variant) => {
  const test = it.skipIf(!variant.available);
  const fleet = useFleet(variant, CACHE_ENV, { workers: 0, apis: 2 });

  test('every acknowledged retarget and delete is what the other process serves once the database is back', async () => {
    const [a, b] = fleet.apis.map((api) => api.url) as [string, string];
    await createAndCache(a, b);
    const fault = fleet.failDatabase(DROP_STORM_MS);
    const { expected, refusals } = await changeAll(a);
    const faulted = await fault;
    const ms = await followed(b, expected);
    console.log(
      `cache on ${variant.name}: ${faulted}; ${refusals} changes refused and sent again; ` +
        `B followed every change ${ms} ms after the fault ended`,
    );
    expect(refusals, 'no change was refused: the fault was not felt').toBeGreaterThan(0);
  }, 120_000);
});

describe.skipIf(!postgres.available)('a cache whose process was cut off from PostgreSQL, on the embedded bus', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    database = await postgres.create();
    const behind = await postgresBehindProxy(database.databaseUrl);
    proxy = behind.proxy;
    // DB_CONNECT_TIMEOUT_MS stays at its default: the cut resets connections at once, and under
    // CI's load a new connection to a healthy server took past 500 ms, which ended a start.
    servers.push(await startServer({ ...CACHE_ENV, DATABASE_URL: database.databaseUrl }));
    servers.push(await startServer({ ...CACHE_ENV, DATABASE_URL: behind.url }));
  }, 60_000);
  afterAll(async () => {
    await proxy?.pass();
    for (const server of servers) await server.stop();
    await proxy?.close();
    await database?.drop();
  });

  it('serves every change made while it could not read the log, once it can again', async () => {
    const [a, b] = servers.map((server) => server.url) as [string, string];
    await createAndCache(a, b);
    await proxy.refuse();
    // A goes on: nothing of it is refused. B's consumer meets the cut while A changes every link.
    const { expected, refusals } = await changeAll(a);
    expect(refusals).toBe(0);
    await proxy.pass();
    const ms = await followed(b, expected);
    console.log(`cache cut off on postgres: B followed every change ${ms} ms after it reached the database again`);
  }, 120_000);
});
