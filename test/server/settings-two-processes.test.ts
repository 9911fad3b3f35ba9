import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, type TestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { newAccount, send, sessionOf, type BrowserSession } from '../helpers/http-client.js';
import { codeMaker, newMapping } from '../helpers/http.js';
import { CENSUS_ENV } from '../helpers/outbox-census.js';
import { type ServerProcess, startAdministeredPair } from '../helpers/server-process.js';

const ADMIN = { username: 'twoadmin', email: 'twoadmin@example.com', password: 'two-processes-admin' };

/**
 * Two `serve` processes of the built service on one database and no Redis: their counters are
 * each their own, so a settings change made through one must reach the other through the
 * database, and be in force there within a second (issue 14).
 */
describe.each(BACKENDS)('runtime settings across two processes on $name without Redis', (backend) => {
  const test = it.skipIf(!backend.available);
  const code = codeMaker('tset');
  let database: TestDatabase;
  const servers: ServerProcess[] = [];
  let admin: BrowserSession;

  beforeAll(async () => {
    if (!backend.available) return;
    database = await backend.create();
    servers.push(...(await startAdministeredPair({ ...CENSUS_ENV, DATABASE_URL: database.databaseUrl }, ADMIN)));
    const login = await send(servers[0]!.url, 'POST', '/api/v1/auth/login', {
      body: { username: ADMIN.username, password: ADMIN.password },
    });
    admin = sessionOf(login)!;
    expect(admin, login.text).toBeDefined();
  }, 60_000);
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop('SIGKILL')));
    await database?.drop();
  });

  const change = async (server: ServerProcess, settings: Record<string, unknown>) => {
    const answer = await send(server.url, 'PATCH', '/api/v1/admin/settings', { body: settings, session: admin });
    expect(answer.status, answer.text).toBe(200);
    return Date.now();
  };
  const shorten = (server: ServerProcess) => send(server.url, 'POST', '/shorten', { body: newMapping(code) });
  const createLink = (server: ServerProcess) =>
    send(server.url, 'POST', '/api/v1/links', { body: { url: 'https://example.com/two-processes' } });
  const register = (server: ServerProcess) =>
    send(server.url, 'POST', '/api/v1/auth/register', { body: { ...newAccount('twoset'), password: 'twelve-chars' } });

  test('a change made through one is in force on the other within a second', async () => {
    const [a, b] = servers as [ServerProcess, ServerProcess];
    expect((await shorten(b)).status).toBe(201);
    expect((await createLink(b)).status).toBe(201);
    expect((await register(b)).status).toBe(201);

    const changedAt = await change(a, { link_write_policy: 'owned', password_min_length: 16 });
    await eventually(async () => expect((await shorten(b)).status).toBe(401), { timeoutMs: 1000 });
    expect(Date.now() - changedAt).toBeLessThan(1000);
    expect((await createLink(b)).status).toBe(401);
    const refused = await register(b);
    expect([refused.status, refused.json<{ detail: string }>().detail]).toEqual([
      400,
      'Password must be at least 16 characters',
    ]);

    // And back, the other way round.
    const reopenedAt = await change(b, { link_write_policy: 'open', password_min_length: 12 });
    await eventually(async () => expect((await shorten(a)).status).toBe(201), { timeoutMs: 1000 });
    expect(Date.now() - reopenedAt).toBeLessThan(1000);
    expect((await createLink(a)).status).toBe(201);
    expect((await register(a)).status).toBe(201);
  }, 30_000);

  test('changes made at once through both, naming the settings in either order, all apply, one after another', async () => {
    const [a, b] = servers as [ServerProcess, ServerProcess];
    // Each change a pair of its own; half name the settings the other way round (rows locked in
    // the other order, where each is written in turn).
    const pairs = Array.from({ length: 24 }, (_, i) => ({
      max_login_attempts: 10 + i,
      lockout_duration_minutes: 100 + i,
    }));
    const answers = await Promise.all(
      pairs.map((pair, i) => {
        const body =
          i % 4 < 2
            ? pair
            : { lockout_duration_minutes: pair.lockout_duration_minutes, max_login_attempts: pair.max_login_attempts };
        return send((i % 2 === 0 ? a : b).url, 'PATCH', '/api/v1/admin/settings', { body, session: admin });
      }),
    );
    expect(
      answers.filter((answer) => answer.status !== 200).map((answer) => `${answer.status} ${answer.text}`),
    ).toEqual([]);
    // What is in force is one change whole, the same on both processes.
    const inForce = async (server: ServerProcess) => {
      const answer = await send(server.url, 'GET', '/api/v1/admin/settings', { session: admin });
      const { max_login_attempts, lockout_duration_minutes } = answer.json<Record<string, number>>();
      return { max_login_attempts, lockout_duration_minutes };
    };
    await eventually(
      async () => {
        const [onA, onB] = [await inForce(a), await inForce(b)];
        expect(onB).toEqual(onA);
        expect(pairs).toContainEqual(onA);
      },
      { timeoutMs: 2_000 },
    );
    await change(a, { max_login_attempts: 5, lockout_duration_minutes: 15 });
  }, 30_000);
});
