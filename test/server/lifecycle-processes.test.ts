import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { BACKENDS, type TestDatabase, testConfig } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { CENSUS_ENV } from '../helpers/outbox-census.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { storedClicks } from '../helpers/stored-clicks.js';

/**
 * `max_visits` is exact across processes (README "Expiry and visit limits"): two service
 * processes, as built, on one database (a SQLite file, or PostgreSQL) take many concurrent
 * redirects of one limited link, and exactly `max_visits` of them answer 302, the rest 410;
 * the clicks counted are those 302s; `url.expired` is recorded once per stop, also for links that
 * expire by time with nobody visiting them. A PATCH through one process raising or clearing the
 * limit holds on the other once its cache has followed the change's event.
 */
describe.each(BACKENDS)('link lifecycle across two processes on $name', (backend) => {
  let database: TestDatabase;
  let reader: Database;
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    if (!backend.available) return;
    database = await backend.create();
    const env = {
      ...CENSUS_ENV,
      DATABASE_URL: database.databaseUrl,
      CLICK_FLUSH_INTERVAL_MS: '100',
      EVENT_POLL_MS: '50',
    };
    // One after the other: the first migrates the database.
    servers.push(await startServer(env));
    servers.push(await startServer(env));
    reader = openDatabase(testConfig(database.databaseUrl).database);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await reader?.close();
    await database?.drop();
  });

  const [a, b] = [0, 1].map((i) => ({
    get url() {
      return servers[i]!.url;
    },
  })) as [{ url: string }, { url: string }];

  async function send(server: { url: string }, method: string, path: string, body?: unknown): Promise<Response> {
    return fetch(`${server.url}${path}`, {
      method,
      redirect: 'manual',
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
  }

  /** `count` GETs at once, alternating between the processes: how many answered each status. */
  async function burst(code: string, count: number): Promise<Record<number, number>> {
    const answers = await Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const response = await send(i % 2 === 0 ? a : b, 'GET', `/${code}`);
        await response.arrayBuffer();
        return response.status;
      }),
    );
    const byStatus: Record<number, number> = {};
    for (const status of answers) byStatus[status] = (byStatus[status] ?? 0) + 1;
    return byStatus;
  }

  async function expiredEvents(code: string): Promise<{ reason: string }[]> {
    const db = reader.db as unknown as Kysely<EventTables>;
    const rows = await db.selectFrom('event_log').select('envelope').where('topic', '=', 'url_events').execute();
    return rows
      .map((row) => JSON.parse(row.envelope) as { event_type: string; payload: { code: string; reason: string } })
      .filter((e) => e.event_type === 'url.expired' && e.payload.code === code)
      .map((e) => e.payload);
  }

  const clicks = (code: string) => storedClicks(reader.db, { code });

  /** Waits until both processes' flushes have written every click of `code` they answered: `expected`. */
  const clicksReach = (code: string, expected: number) =>
    eventually(async () => expect(await clicks(code)).toBe(expected), { timeoutMs: 10_000, intervalMs: 100 });

  /** Waits until `server` answers HEAD with `status` (HEAD reserves nothing: the cache shows the change). */
  const headIs = (server: { url: string }, code: string, status: number) =>
    eventually(async () => expect((await send(server, 'HEAD', `/${code}`)).status).toBe(status), {
      timeoutMs: 10_000,
    });

  it.skipIf(!backend.available)(
    'exactly max_visits redirects answer 302 under concurrent load from both, through PATCH raise and clear',
    async () => {
      const code = `mv${backend.name.slice(0, 2)}0001`;
      const created = await send(a, 'POST', '/shorten', {
        code,
        url: 'https://example.com/limited',
        created_at: '2024-01-01T00:00:00Z',
        click_count: 0,
        max_visits: 25,
      });
      expect(created.status, await created.text()).toBe(201);
      // Both know the link (and its limit) before the burst.
      await headIs(a, code, 302);
      await headIs(b, code, 302);

      expect(await burst(code, 200)).toEqual({ 302: 25, 410: 175 });
      await clicksReach(code, 25);
      await eventually(async () =>
        expect(await expiredEvents(code)).toEqual([expect.objectContaining({ reason: 'max_visits' })]),
      );
      const gone = await send(b, 'GET', `/${code}`);
      expect(await gone.json()).toEqual({ detail: 'This link has reached its limit of 25 visits.' });

      const raised = await send(a, 'PATCH', `/${code}`, { max_visits: 40 });
      expect(raised.status, await raised.text()).toBe(200);
      await headIs(a, code, 302);
      await headIs(b, code, 302);
      expect(await burst(code, 120)).toEqual({ 302: 15, 410: 105 });
      await clicksReach(code, 40);
      await eventually(async () => expect(await expiredEvents(code)).toHaveLength(2));

      const cleared = await send(b, 'PATCH', `/${code}`, { max_visits: null });
      expect(cleared.status, await cleared.text()).toBe(200);
      await headIs(a, code, 302);
      await headIs(b, code, 302);
      expect(await burst(code, 60)).toEqual({ 302: 60 });
      await clicksReach(code, 100);
      expect(await expiredEvents(code)).toHaveLength(2);
    },
    90_000,
  );

  it.skipIf(!backend.available)(
    'links that expire by time with nobody visiting get one url.expired each, and 410 on both',
    async () => {
      const codes = Array.from({ length: 12 }, (_, i) => `ex${backend.name.slice(0, 2)}${String(i).padStart(4, '0')}`);
      const expiresAt = new Date(Date.now() + 1500).toISOString();
      for (const [i, code] of codes.entries()) {
        const response = await send(i % 2 === 0 ? a : b, 'POST', '/api/v1/links', {
          code,
          url: 'https://example.com/timed',
          expires_at: expiresAt,
        });
        expect(response.status, await response.text()).toBe(201);
      }
      for (const code of codes) {
        await eventually(async () => expect(await expiredEvents(code)).toHaveLength(1), { timeoutMs: 15_000 });
      }
      for (const code of codes) {
        for (const server of [a, b]) {
          const response = await send(server, 'GET', `/${code}`);
          expect(response.status).toBe(410);
          expect(((await response.json()) as { detail: string }).detail).toMatch(/^This link expired at /);
        }
      }
      // A later link's event means both processes swept again since: still one each.
      const later = `ex${backend.name.slice(0, 2)}9999`;
      await send(a, 'POST', '/api/v1/links', {
        code: later,
        url: 'https://example.com/timed',
        expires_at: new Date(Date.now() + 1000).toISOString(),
      });
      await eventually(async () => expect(await expiredEvents(later)).toHaveLength(1), { timeoutMs: 15_000 });
      for (const code of codes)
        expect(await expiredEvents(code)).toEqual([expect.objectContaining({ reason: 'expired_at' })]);
      for (const code of codes) expect(await clicks(code)).toBe(0);
    },
    60_000,
  );
});
