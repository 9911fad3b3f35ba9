import { afterAll, describe, expect, it } from 'vitest';
import { adminEnv, type TestApp, useTestApp } from '../helpers/app.js';
import { postgres, useTestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { expectError } from '../helpers/http.js';
import {
  jsonPost,
  login,
  loginRequest,
  ManualClock,
  me,
  newUser,
  registerUser,
  type Session,
} from '../helpers/auth.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';

const LOCKED = 'Account locked due to too many failed attempts';
const ADMIN = { username: 'cluster_admin', email: 'cluster_admin@example.com', password: 'admin password 1' };
const available = postgres.available && (await redisAvailable());

/**
 * Two instances of the service on one PostgreSQL database sharing one Redis, as behind a load
 * balancer: lockouts, revocations and setting changes made through one hold on the other.
 */
describe('two instances sharing PostgreSQL and Redis', () => {
  const prefix = uniqueRedisPrefix('auth-cluster');
  afterAll(async () => {
    if (available) await deleteRedisKeys(prefix);
  });
  const database = useTestDatabase(postgres, available);
  const env = {
    REDIS_URL,
    REDIS_KEY_PREFIX: prefix,
    SECRET_KEY: 'cluster-secret-key-shared-by-every-instance-0123',
    // This suite is about the per-username lockout: its many failures all come from 127.0.0.1, and
    // Redis's real-time window outlasts the suite. The per-address throttle has its own suite.
    LOGIN_ADDRESS_MAX_FAILURES: '0',
    ...adminEnv(ADMIN),
  };
  const clock = new ManualClock();
  const a = useTestApp(postgres, env, { accounts: true, database, clock, admin: ADMIN, when: available });
  const b = useTestApp(postgres, env, { accounts: true, database, clock, when: available });
  const adminOnA = a.admin;

  const account = async () => {
    const body = newUser('two');
    await registerUser(a.app, body);
    return body;
  };
  const fail = async (t: TestApp, username: string, times: number) => {
    for (let i = 0; i < times; i++) expectError(await loginRequest(t.app, username, 'wrong password!'), 401);
  };
  const patchSettings = (t: TestApp, session: Session, body: unknown) =>
    t.app.inject({
      method: 'PATCH',
      url: '/api/v1/admin/settings',
      headers: { ...session.headers, 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });

  it('a lock made through one instance is seen by the other', async (ctx) => {
    if (!available) return ctx.skip();
    const { username, password } = await account();
    await fail(a, username, 5);
    const response = await loginRequest(b.app, username, password);
    expectError(response, 423, LOCKED);
    const retryAfter = Number(response.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(890);
    expect(retryAfter).toBeLessThanOrEqual(900);
  });

  it('failures through both instances add up, and unknown usernames lock the same way', async (ctx) => {
    if (!available) return ctx.skip();
    const { username, password } = await account();
    await fail(a, username, 3);
    await fail(b, username, 2);
    expectError(await loginRequest(a.app, username, password), 423, LOCKED);
    const ghost = newUser('ghost').username;
    await fail(b, ghost, 2);
    await fail(a, ghost, 3);
    expectError(await loginRequest(b.app, ghost, 'anything at all'), 423, LOCKED);
  });

  it('a successful login through one instance resets the count for both', async (ctx) => {
    if (!available) return ctx.skip();
    const { username, password } = await account();
    await fail(a, username, 4);
    await login(b.app, username, password);
    await fail(a, username, 4);
    await login(a.app, username, password);
  });

  it('a logout through one instance is honoured by the other', async (ctx) => {
    if (!available) return ctx.skip();
    const { username, password } = await account();
    const session = await login(a.app, username, password);
    const other = await login(b.app, username, password);
    expect((await me(b.app, session.cookie)).statusCode).toBe(200);
    const logout = await a.app.inject({
      method: 'POST',
      url: '/api/v1/auth/logout',
      headers: { cookie: session.cookie },
    });
    expect(logout.statusCode).toBe(200);
    expectError(await me(b.app, session.cookie), 401, 'Not authenticated');
    expectError(await me(a.app, session.cookie), 401, 'Not authenticated');
    // Only that session ends.
    expect((await me(a.app, other.cookie)).statusCode).toBe(200);
  });

  it('a session from one instance works on the other, CSRF token included', async (ctx) => {
    if (!available) return ctx.skip();
    const response = await patchSettings(b, adminOnA, {});
    expect(response.statusCode, response.body).toBe(200);
  });

  it('a settings change through one instance is in force on the other within one second', async (ctx) => {
    if (!available) return ctx.skip();
    const changed = await patchSettings(a, adminOnA, { password_min_length: 14, max_login_attempts: 2 });
    expect(changed.statusCode, changed.body).toBe(200);
    try {
      const adminOnB = await login(b.app, ADMIN.username, ADMIN.password);
      await eventually(
        async () => {
          const seen = await b.app.inject({
            method: 'GET',
            url: '/api/v1/admin/settings',
            headers: { cookie: adminOnB.cookie },
          });
          expect(seen.json()).toMatchObject({ password_min_length: 14, max_login_attempts: 2 });
        },
        { timeoutMs: 1000 },
      );
      expectError(
        await jsonPost(b.app, '/api/v1/auth/register', newUser('min', { password: 'thirteen char' })),
        400,
        'Password must be at least 14 characters',
      );
      const { username, password } = await account();
      await fail(b, username, 2);
      expectError(await loginRequest(b.app, username, password), 423, LOCKED);
    } finally {
      const reset = await patchSettings(a, adminOnA, { password_min_length: 8, max_login_attempts: 5 });
      expect(reset.statusCode).toBe(200);
    }
  });
});
