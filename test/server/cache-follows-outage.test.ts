/**
 * The cache invalidation consumer while the database fails. Two API processes keep links in their
 * caches for an hour (CACHE_TTL_MS), so only a `url.updated` / `url.deleted` can change what one
 * of them serves. Links are cached on the second; the first retargets and deletes them while the
 * database fails under both (PostgreSQL: their connections dropped every 40 ms for 6 s; SQLite:
 * another process holds the write lock for 6 s), each change sent again after a 503 until it is
 * acknowledged. On the embedded bus the events wait in the database, on NATS in the outbox, until
 * it answers again. The checker: every acknowledged change is what the second process serves
 * within seconds of the database coming back, not after its TTL. On the embedded bus (SQLite,
 * PostgreSQL) and on NATS JetStream (with PostgreSQL). The built server (`npm run build`).
 */
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { DROP_STORM_MS, FLEET_VARIANTS, useFleet } from '../helpers/fleet.js';
import { send } from '../helpers/http-client.js';

const LINKS = 30;
/** The caches follow within this of the database coming back. */
const FOLLOW_MS = 15_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Where `GET /{code}` on `base` sends a client: its `Location`, or the status when it is not a 302. */
async function answerOf(base: string, code: string): Promise<string> {
  const answer = await send(base, 'GET', `/${code}`);
  return answer.status === 302 ? answer.headers.get('location')! : String(answer.status);
}

/** Sends a change until it is acknowledged (`done`), after each 503; how many 503s it met. */
async function untilAcknowledged(change: () => Promise<number>, done: readonly number[]): Promise<number> {
  for (let refused = 0; ; refused++) {
    const status = await change().catch(() => 503);
    if (done.includes(status)) return refused;
    expect(status).toBe(503);
    await sleep(100);
  }
}

describe.each(FLEET_VARIANTS)('caches that follow changes made while the database fails, on $name', (variant) => {
  const test = it.skipIf(!variant.available);
  const fleet = useFleet(
    variant,
    {
      RATE_LIMIT_ENABLED: 'false',
      CACHE_TTL_MS: '3600000',
      EVENT_LEASE_MS: '1000',
      EVENT_POLL_MS: '50',
      NATS_ACK_WAIT_MS: '3000',
    },
    0,
    2,
  );

  test('every acknowledged retarget and delete is what the other process serves once the database is back', async () => {
    const [a, b] = fleet.apis.map((api) => api.url) as [string, string];
    // A database of the fleet's own: the codes need no tag to be new.
    const codes = Array.from({ length: LINKS }, (_, i) => `cfollow${String(i).padStart(2, '0')}`);
    const first = (code: string) => `https://example.com/${code}/v1`;
    for (const code of codes) {
      const created = await send(a, 'POST', '/shorten', {
        body: { code, url: first(code), created_at: '2024-01-01T00:00:00Z', click_count: 0 },
      });
      expect(created.status, created.text).toBe(201);
    }
    // Cached on B (after its own url.created events, which drop what it held for the codes).
    await eventually(
      async () => {
        for (const code of codes) expect(await answerOf(b, code)).toBe(first(code));
      },
      { timeoutMs: 10_000, intervalMs: 200 },
    );

    // Through A, during the fault: a third of the links deleted, the rest retargeted, each change
    // sent until acknowledged; what B must serve in the end.
    const fault = fleet.failDatabase(DROP_STORM_MS);
    const expected = new Map<string, string>();
    let refusals = 0;
    for (const [i, code] of codes.entries()) {
      await sleep(150);
      if (i % 3 === 0) {
        // A DELETE whose commit's answer was lost finds nothing the second time.
        refusals += await untilAcknowledged(async () => (await send(a, 'DELETE', `/${code}`)).status, [204, 404]);
        expected.set(code, '404');
      } else {
        const url = `https://example.com/${code}/v2`;
        refusals += await untilAcknowledged(
          async () => (await send(a, 'PATCH', `/${code}`, { body: { url } })).status,
          [200],
        );
        expected.set(code, url);
      }
    }
    const faulted = await fault;
    const back = Date.now();
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
    console.log(
      `cache on ${variant.name}: ${faulted}; ${refusals} changes refused and sent again; ` +
        `B followed every change ${Date.now() - back} ms after the fault ended`,
    );
    expect(refusals, 'no change was refused: the fault was not felt').toBeGreaterThan(0);
  }, 120_000);
});
