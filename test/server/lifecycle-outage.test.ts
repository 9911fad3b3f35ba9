import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgres, type TestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { CENSUS_ENV } from '../helpers/outbox-census.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { postgresBehindProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * The visit reservation of a limited link is a write on the redirect path: with PostgreSQL cut off
 * in the middle of a concurrent load from two processes, the checker counts what was acknowledged
 * (302s) against what arrived (`visits_used`, the clicks): no 302 without its stored reservation,
 * never more 302s than `max_visits`, every 302's click counted once the database is back, and no
 * reservation stored beyond the requests that failed (a commit whose answer the cut lost).
 */
describe.skipIf(!postgres.available)('visit reservations with PostgreSQL failing under load, two processes', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  const servers: ServerProcess[] = [];
  const MAX = 200;
  const code = 'outage01';

  const query = async <R extends pg.QueryResultRow>(text: string): Promise<R[]> => {
    const client = new pg.Client({ connectionString: database.databaseUrl });
    await client.connect();
    try {
      return (await client.query<R>(text)).rows;
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    database = await postgres.create();
    const behind = await postgresBehindProxy(database.databaseUrl);
    proxy = behind.proxy;
    // DB_CONNECT_TIMEOUT_MS stays at its default: the proxy's refusal ends a connection at once,
    // and a short deadline would only refuse a healthy connection that is slow on a loaded machine.
    const env = {
      ...CENSUS_ENV,
      DATABASE_URL: behind.url,
      CLICK_FLUSH_INTERVAL_MS: '100',
      EVENT_POLL_MS: '100',
    };
    servers.push(await startServer(env));
    servers.push(await startServer(env));
  }, 60_000);
  afterAll(async () => {
    await proxy?.pass();
    await Promise.all(servers.map((s) => s.stop()));
    await proxy?.close();
    await database?.drop();
  });

  it('acknowledged 302s never outrun stored reservations, nor max_visits', async () => {
    const created = await fetch(`${servers[0]!.url}/shorten`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        code,
        url: 'https://example.com/outage',
        created_at: '2024-01-01T00:00:00Z',
        click_count: 0,
        max_visits: MAX,
      }),
    });
    expect(created.status).toBe(201);

    const statuses: Record<string, number> = {};
    let sent = 0;
    let answered = 0;
    let cut: Promise<void> | undefined;
    // 600 requests, and more while the link is not used up yet (at most 3,000): how many it takes
    // after the cut depends on how soon the processes reach PostgreSQL again, seconds on a loaded
    // machine, each request meanwhile answered 503 at once.
    const worker = async (w: number) => {
      while (sent < 600 || ((statuses['410'] ?? 0) === 0 && sent < 3_000)) {
        const n = sent++;
        let status: string;
        try {
          const response = await fetch(`${servers[(n + w) % 2]!.url}/${code}`, { redirect: 'manual' });
          await response.arrayBuffer();
          status = String(response.status);
        } catch {
          status = 'error';
        }
        statuses[status] = (statuses[status] ?? 0) + 1;
        answered++;
        // A quarter in, PostgreSQL goes away for the next 60 answers (each 503 at once), then back.
        if (answered === 100) {
          cut = (async () => {
            await proxy.refuse();
            const resumeAt = answered + 60;
            await eventually(() => answered >= resumeAt, { timeoutMs: 20_000 });
            await proxy.pass();
          })();
        }
      }
    };
    await Promise.all(Array.from({ length: 16 }, (_, w) => worker(w)));
    await cut;

    const ok = statuses['302'] ?? 0;
    const failed = sent - ok - (statuses['410'] ?? 0);
    expect(
      Object.keys(statuses).every((s) => ['302', '410', '503'].includes(s)),
      JSON.stringify(statuses),
    ).toBe(true);
    expect(failed).toBeGreaterThan(0); // the cut was felt
    expect(ok).toBeLessThanOrEqual(MAX);

    const [row] = await query<{ visits_used: string; click_count: string }>(
      `SELECT visits_used, click_count FROM url_mappings WHERE code = '${code}'`,
    );
    const reserved = Number(row!.visits_used);
    expect(ok).toBeLessThanOrEqual(reserved);
    expect(reserved).toBeLessThanOrEqual(MAX);
    // A reservation without its 302 is one whose request failed (at most two tries each: the fast
    // path's, and the route's it handed the error on to).
    expect(reserved - ok).toBeLessThanOrEqual(2 * failed);
    // Enough requests came after the cut to use the rest: the link ends used up.
    expect(reserved).toBe(MAX);

    // Every 302 was counted as a click once the flushes got through, exactly once: a click flush
    // whose commit the cut acknowledged to nobody is written again, and added once (the chunk's
    // writer and sequence number, test/storage/click-lost-commit.test.ts).
    const counted = async () => {
      const [row] = await query<{ n: string }>(
        `SELECT m.click_count + COALESCE(d.delta, 0) AS n FROM url_mappings m
         LEFT JOIN url_click_deltas d ON d.url_id = m.id WHERE m.code = '${code}'`,
      );
      return Number(row!.n);
    };
    await eventually(async () => expect(await counted()).toBeGreaterThanOrEqual(ok), {
      timeoutMs: 15_000,
      intervalMs: 200,
    });
    // Nothing more arrives after the flushes caught up (a chunk counted twice would show here).
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await counted()).toBe(ok);
    // Its url.expired once, whichever request took the last visit.
    const events = await query<{ n: string }>(
      `SELECT count(*) AS n FROM event_log WHERE envelope::jsonb ->> 'event_type' = 'url.expired'
       AND envelope::jsonb -> 'payload' ->> 'code' = '${code}'`,
    );
    expect(Number(events[0]!.n)).toBe(1);
  }, 90_000);
});
