import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/adapters/storage/database.js';
import { testConfig, sqlite, type TestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { storedCreatedByCode } from '../helpers/event-store.js';
import { fetchShorten } from '../helpers/http.js';
import { CENSUS_ENV, census, shortenLoad } from '../helpers/outbox-census.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';

/**
 * `serve --workers 2` on one embedded SQLite file, as built: the two serving processes share the
 * port and the database; what either acknowledges is stored with its event, clicks are counted
 * once, a change made through one is served by the other, and SIGTERM stops them all.
 */

/** The pids of the serving processes that logged an answer (each logs its own `request completed`). */
function answeringPids(server: ServerProcess): Set<number> {
  const pids = new Set<number>();
  for (const line of server.output().split('\n')) {
    if (!line.includes('"request completed"')) continue;
    pids.add((JSON.parse(line) as { pid: number }).pid);
  }
  return pids;
}

/** The serving processes the primary started, by the pid it logged. */
function workerPids(server: ServerProcess): number[] {
  return server
    .output()
    .split('\n')
    .filter((line) => line.includes('"serving process started"'))
    .map((line) => (JSON.parse(line) as { workerPid: number }).workerPid);
}

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** `count` requests, each on a connection of its own, so that the primary spreads them over the workers. */
async function onFreshConnections(count: number, request: (init: RequestInit) => Promise<Response>) {
  const answers: Response[] = [];
  for (let i = 0; i < count; i++) answers.push(await request({ headers: { connection: 'close' }, redirect: 'manual' }));
  return answers;
}

const clickCount = async (url: string, code: string) => {
  const list = (await (await fetch(`${url}/urls`)).json()) as { code: string; click_count: number }[];
  return list.find((m) => m.code === code)?.click_count;
};

describe('serve --workers 2 on one SQLite file', () => {
  let database: TestDatabase;
  let server: ServerProcess;

  beforeAll(async () => {
    database = await sqlite.create();
    server = await startServer({
      ...CENSUS_ENV,
      DATABASE_URL: database.databaseUrl,
      WORKERS: '2',
      CLICK_FLUSH_INTERVAL_MS: '100',
      // Created at start-up by the first serving process to get there; the other finds it.
      ADMIN_USERNAME: 'workadmin',
      ADMIN_EMAIL: 'workadmin@example.com',
      ADMIN_PASSWORD: 'workers-admin-password',
    });
    // Both serving processes listen (the first to do so is the one whose address the helper saw).
    await eventually(() => server.output().split('Server listening at').length - 1 === 2, { timeoutMs: 20_000 });
  }, 30_000);
  afterAll(async () => {
    await server?.stop('SIGKILL');
    await database?.drop();
  });

  it('stores every acknowledged mapping, with exactly one url.created event, whichever worker took it', async () => {
    const load = await shortenLoad([server.url], 400, 32);
    expect([...load.refused.entries()]).toEqual([]);
    expect(load.acknowledged).toHaveLength(400);
    expect(answeringPids(server).size).toBe(2);

    const stored = (await (await fetch(`${server.url}/urls`)).json()) as { code: string }[];
    const codes = new Set(stored.map((m) => m.code));
    expect(load.acknowledged.filter((code) => !codes.has(code))).toEqual([]);

    const reader = openDatabase(testConfig(database.databaseUrl).database);
    try {
      // The event store is written by the consumer of the first worker only, once per event.
      const result = await eventually(
        async () => {
          const counted = census(load.acknowledged, await storedCreatedByCode(reader.db));
          if (counted.missing.length > 0) throw new Error(`${counted.missing.length} events not stored yet`);
          return counted;
        },
        { timeoutMs: 15_000, intervalMs: 200 },
      );
      expect(result.duplicated).toEqual([]);
      expect(result.found).toBe(400);
    } finally {
      await reader.close();
    }
  }, 60_000);

  it('answers one 201 and 409s for a code posted through both workers at once', async () => {
    const body = JSON.stringify({
      code: 'twice01',
      url: 'https://example.com/twice',
      created_at: '2024-01-01T00:00:00Z',
      click_count: 0,
    });
    const answers = await Promise.all(
      Array.from({ length: 8 }, () =>
        fetch(`${server.url}/shorten`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', connection: 'close' },
          body,
        }),
      ),
    );
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([201, 409, 409, 409, 409, 409, 409, 409]);
  });

  it('counts each click once, whichever worker answered the redirect', async () => {
    const created = await fetchShorten(server.url, { code: 'clicks01', url: 'https://example.com/c' });
    expect(created.status).toBe(201);
    const before = answeringPids(server).size;
    const answers = await onFreshConnections(40, (init) => fetch(`${server.url}/clicks01`, init));
    expect(answers.map((a) => a.status)).toEqual(Array(40).fill(302));
    expect(before).toBe(2);
    // Every worker flushes its own buffer every 100 ms: the count reaches 40 and stays there.
    await eventually(async () => (await clickCount(server.url, 'clicks01')) === 40, { timeoutMs: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await clickCount(server.url, 'clicks01')).toBe(40);
  }, 30_000);

  it("serves a change made through one worker from the other's cache too", async () => {
    const mapping = {
      code: 'moved01',
      url: 'https://example.com/before',
      created_at: '2024-01-01T00:00:00Z',
      click_count: 0,
    };
    const created = await fetchShorten(server.url, mapping);
    expect(created.status).toBe(201);
    // Both workers' caches hold the old target (the connections alternate between them).
    const warm = await onFreshConnections(10, (init) => fetch(`${server.url}/moved01`, init));
    expect(warm.map((a) => a.headers.get('location'))).toEqual(Array(10).fill(mapping.url));

    const patched = await fetch(`${server.url}/moved01`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: 'https://example.com/after' }),
    });
    expect(patched.status).toBe(200);
    // Within a second (README), every worker serves the new target.
    await eventually(
      async () => {
        const answers = await onFreshConnections(10, (init) => fetch(`${server.url}/moved01`, init));
        return answers.every((a) => a.headers.get('location') === 'https://example.com/after');
      },
      { timeoutMs: 1_500, intervalMs: 100 },
    );

    const deleted = await fetch(`${server.url}/moved01`, { method: 'DELETE' });
    expect(deleted.status).toBe(204);
    await eventually(
      async () => {
        const answers = await onFreshConnections(10, (init) => fetch(`${server.url}/moved01`, init));
        return answers.every((a) => a.status === 404);
      },
      { timeoutMs: 1_500, intervalMs: 100 },
    );
  }, 30_000);

  it('applies a settings change made through one worker in the other within a second', async () => {
    const login = await fetch(`${server.url}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'workadmin', password: 'workers-admin-password' }),
    });
    expect(login.status).toBe(200);
    const cookies = login.headers.getSetCookie().map((c) => c.slice(0, c.indexOf(';')));
    const csrf = cookies.find((c) => c.startsWith('csrf_token='))!.slice('csrf_token='.length);
    const register = (n: number) =>
      onFreshConnections(6, (init) =>
        fetch(`${server.url}/api/v1/auth/register`, {
          ...init,
          method: 'POST',
          headers: { ...init.headers, 'content-type': 'application/json' },
          body: JSON.stringify({
            username: `wuser${n}${Math.random().toString(36).slice(2, 8)}`,
            email: `w${n}${Math.random().toString(36).slice(2, 8)}@example.com`,
            password: 'twelve-chars',
          }),
        }),
      );
    expect((await register(1)).map((r) => r.status)).toEqual(Array(6).fill(201));
    const patched = await fetch(`${server.url}/api/v1/admin/settings`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json', cookie: cookies.join('; '), 'x-csrf-token': csrf },
      body: JSON.stringify({ password_min_length: 16 }),
    });
    expect(patched.status, await patched.text()).toBe(200);
    // Both workers refuse the 12-character password now (the primary carries the change signal).
    await eventually(async () => (await register(2)).every((r) => r.status !== 201), {
      timeoutMs: 1_500,
      intervalMs: 100,
    });
  }, 30_000);

  it('restarts a worker that dies, and logs it', async () => {
    const [, second] = workerPids(server);
    process.kill(second!, 'SIGKILL');
    await eventually(() => workerPids(server).length === 3, { timeoutMs: 10_000 });
    expect(server.output()).toContain('serving process died; restarting it');
    await eventually(() => server.output().split('Server listening at').length - 1 === 3, { timeoutMs: 20_000 });
    const answers = await onFreshConnections(4, (init) => fetch(`${server.url}/health`, init));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
  }, 30_000);

  it('stops every worker gracefully on SIGTERM to the primary', async () => {
    const pids = workerPids(server).filter(isAlive);
    expect(pids).toHaveLength(2);
    expect(await server.stop('SIGTERM')).toBe(0);
    expect(pids.filter(isAlive)).toEqual([]);
    expect(server.output().split('shut down cleanly').length - 1).toBeGreaterThanOrEqual(2);
  }, 30_000);
});
