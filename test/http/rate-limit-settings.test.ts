/**
 * Rate-limit values in the admin settings (design "Rate limiting": limits settable by env and by
 * the admin settings; a change takes effect on every instance within 1 s): a PATCH of
 * /api/v1/admin/settings changes the policy the limiter enforces.
 */
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { adminEnv, type TestApp, useTestApp, useTestApps } from '../helpers/app.js';
import { login, type Session } from '../helpers/auth.js';
import { sqlite, useTestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { expectError } from '../helpers/http.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';

const SETTINGS = '/api/v1/admin/settings';
const ADMIN = { username: 'limits_admin', email: 'limits_admin@example.com', password: 'admin password 1' };
const ENV = {
  ...adminEnv(ADMIN),
  RATE_LIMIT_ENABLED: 'true',
  RATE_LIMIT_REDIRECTS_LIMIT: '100',
  RATE_LIMIT_REDIRECTS_WINDOW_S: '60',
};

const redirect = (t: TestApp, remoteAddress: string) =>
  t.app.inject({ method: 'GET', url: '/nosuch01', remoteAddress });

const patchSettings = (t: TestApp, admin: Session, body: unknown) =>
  t.app.inject({
    method: 'PATCH',
    url: SETTINGS,
    headers: { ...admin.headers, 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });

function expectPolicy(response: LightMyRequestResponse, quota: number, windowS: number) {
  expect(response.headers['ratelimit-policy']).toBe(`"redirects";q=${quota};w=${windowS}`);
}

describe('rate-limit values in the admin settings, one instance', () => {
  const t = useTestApp(sqlite, ENV, { accounts: true });
  const start = useTestApps();

  it('a PATCH by an administrator is enforced from the next request; GET shows it; bad values are 422', async () => {
    const admin = await login(t.app, ADMIN.username, ADMIN.password);
    const before = await redirect(t, '198.51.100.1');
    expect(before.statusCode).toBe(404);
    expectPolicy(before, 100, 60);

    const patched = await patchSettings(t, admin, {
      rate_limit_redirects_limit: 2,
      rate_limit_redirects_window_seconds: 3600,
    });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({ rate_limit_redirects_limit: 2, rate_limit_redirects_window_seconds: 3600 });
    const got = await t.app.inject({ method: 'GET', url: SETTINGS, headers: { cookie: admin.cookie } });
    expect(got.json()).toMatchObject({ rate_limit_redirects_limit: 2, rate_limit_redirects_window_seconds: 3600 });

    // A client never seen: exactly the new limit, then 429 under the new policy.
    for (let i = 0; i < 2; i++) {
      const admitted = await redirect(t, '198.51.100.2');
      expect(admitted.statusCode).toBe(404);
      expectPolicy(admitted, 2, 3600);
    }
    const refused = await redirect(t, '198.51.100.2');
    expectError(refused, 429, 'Rate limit exceeded');
    expectPolicy(refused, 2, 3600);
    // The client seen before the change: its remaining quota is capped at the new limit.
    expect((await redirect(t, '198.51.100.1')).statusCode).toBe(404);
    expect((await redirect(t, '198.51.100.1')).statusCode).toBe(404);
    expectError(await redirect(t, '198.51.100.1'), 429, 'Rate limit exceeded');

    expectError(await patchSettings(t, admin, { rate_limit_redirects_limit: 0 }), 422, /rate_limit_redirects_limit/);
    expectError(
      await patchSettings(t, admin, { rate_limit_redirects_window_seconds: 86_401 }),
      422,
      /rate_limit_redirects_window_seconds/,
    );
    expectPolicy(await redirect(t, '198.51.100.3'), 2, 3600);

    // Back to the environment's values: the policy follows.
    const restored = await patchSettings(t, admin, {
      rate_limit_redirects_limit: 100,
      rate_limit_redirects_window_seconds: 60,
    });
    expect(restored.statusCode).toBe(200);
    expectPolicy(await redirect(t, '198.51.100.4'), 100, 60);
  });

  it('non-administrators cannot change the limits', async () => {
    expectError(await t.app.inject({ method: 'PATCH', url: SETTINGS, payload: {} }), 401, 'Not authenticated');
  });

  it('stored values apply from the start on an instance started later on the same database', async () => {
    const first = t;
    const admin = await login(first.app, ADMIN.username, ADMIN.password);
    expect((await patchSettings(first, admin, { rate_limit_redirects_limit: 7 })).statusCode).toBe(200);
    const second = await start(sqlite, ENV, { accounts: true, database: first.database });
    expectPolicy(await redirect(second, '198.51.100.5'), 7, 60);
  });
});

describe('rate-limit values in the admin settings, two instances sharing Redis', async () => {
  const available = await redisAvailable();
  const prefix = uniqueRedisPrefix('rate-limit-settings');
  afterAll(async () => {
    if (available) await deleteRedisKeys(prefix);
  });
  const database = useTestDatabase(sqlite, available);
  const start = useTestApps();

  it.skipIf(!available)('a change made through one instance is enforced by the other', async () => {
    const env = {
      ...ENV,
      REDIS_URL,
      REDIS_KEY_PREFIX: prefix,
      SECRET_KEY: 'limits-secret-key-shared-by-both-instances-0123',
    };
    const a = await start(sqlite, env, { accounts: true, database });
    const b = await start(sqlite, env, { accounts: true, database });
    expectPolicy(await redirect(b, '198.51.100.10'), 100, 60);

    const admin = await login(a.app, ADMIN.username, ADMIN.password);
    expect((await patchSettings(a, admin, { rate_limit_redirects_limit: 3 })).statusCode).toBe(200);
    // B learns of it from the change signal in Redis (polled every 250 ms), not from the PATCH.
    // Each probe comes from an address of its own, so as not to use up the quota counted below.
    let probe = 0;
    await eventually(async () => expectPolicy(await redirect(b, `203.0.113.${++probe % 250}`), 3, 60));
    // Both enforce the one shared quota: 3 requests from a new client over A and B, then 429 on either.
    const statuses: number[] = [];
    for (const t of [a, b, a, b]) statuses.push((await redirect(t, '198.51.100.11')).statusCode);
    expect(statuses).toEqual([404, 404, 404, 429]);
  });
});
