/**
 * API keys and disabled accounts hold everywhere at once: two instances sharing PostgreSQL and
 * Redis (a key made, used, revoked and expired through one is seen so by the other; a user
 * disabled through one is refused by the other), and a restart of the service without Redis.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { adminEnv, useTestApp, useTestApps } from '../helpers/app.js';
import { bearer, createApiKey, meByKey, revokeApiKey } from '../helpers/api-keys.js';
import { login, loginRequest, ManualClock, me, signUp } from '../helpers/auth.js';
import { BACKENDS, postgres, useTestDatabase } from '../helpers/backends.js';
import { expectError } from '../helpers/http.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';

const SECRET_KEY = 'api-keys-shared-state-secret-key-0123456789ab';
const ADMIN = { username: 'keys_cluster_admin', email: 'keys_cluster_admin@example.com', password: 'admin password 1' };
const HOUR = 3_600_000;
const available = postgres.available && (await redisAvailable());

describe('API keys and disabled users on two instances sharing PostgreSQL and Redis', () => {
  const prefix = uniqueRedisPrefix('api-keys-cluster');
  afterAll(async () => {
    if (available) await deleteRedisKeys(prefix);
  });
  const database = useTestDatabase(postgres, available);
  const env = { REDIS_URL, REDIS_KEY_PREFIX: prefix, SECRET_KEY, ...adminEnv(ADMIN) };
  const clock = new ManualClock();
  const a = useTestApp(postgres, env, { accounts: true, database, clock, admin: ADMIN, when: available });
  const b = useTestApp(postgres, env, { accounts: true, database, clock, when: available });

  it('a key made on one works on the other; revoked or expired on one, refused by both at once', async (ctx) => {
    if (!available) return ctx.skip();
    const { session } = await signUp(a.app, 'kc');
    const revoked = await createApiKey(a.app, session);
    const expiring = await createApiKey(a.app, session, {
      name: 'short',
      expires_at: new Date(clock.now() + HOUR).toISOString(),
    });
    for (const t of [a, b]) {
      expect((await meByKey(t.app, revoked.key)).statusCode).toBe(200);
      expect((await meByKey(t.app, expiring.key)).statusCode).toBe(200);
    }
    // Revoked through B with the key itself; A refuses it on the very next request.
    expect((await revokeApiKey(b.app, bearer(revoked.key), revoked.id)).statusCode).toBe(204);
    expectError(await meByKey(a.app, revoked.key), 401, 'Not authenticated');
    expectError(await meByKey(b.app, revoked.key), 401, 'Not authenticated');
    clock.advance(HOUR);
    expectError(await meByKey(a.app, expiring.key), 401, 'Not authenticated');
    expectError(await meByKey(b.app, expiring.key), 401, 'Not authenticated');
  });

  it('a user disabled through one instance is refused by the other at once, session and key', async (ctx) => {
    if (!available) return ctx.skip();
    const { user, password } = await signUp(a.app, 'kd');
    const sessionOnB = await login(b.app, user.username, password);
    const { key } = await createApiKey(b.app, sessionOnB);
    expect((await me(b.app, sessionOnB.cookie)).statusCode).toBe(200);
    const disabled = await a.app.inject({
      method: 'PATCH',
      url: `/api/v1/admin/users/${user.id}`,
      headers: { ...a.admin.headers, 'content-type': 'application/json' },
      payload: JSON.stringify({ disabled: true }),
    });
    expect(disabled.statusCode, disabled.body).toBe(200);
    expectError(await me(b.app, sessionOnB.cookie), 401, 'Not authenticated');
    expectError(await meByKey(b.app, key), 401, 'Not authenticated');
  });

  it('a lockout made through one instance and lifted by an admin on it is lifted on the other', async (ctx) => {
    if (!available) return ctx.skip();
    const { user, password } = await signUp(a.app, 'ku');
    for (let i = 0; i < 5; i++) expectError(await loginRequest(b.app, user.username, 'wrong password!'), 401);
    expectError(await loginRequest(a.app, user.username, password), 423);
    const unlocked = await a.app.inject({
      method: 'POST',
      url: `/api/v1/admin/users/${user.id}/unlock`,
      headers: a.admin.headers,
    });
    expect(unlocked.statusCode, unlocked.body).toBe(200);
    await login(b.app, user.username, password);
  });
});

describe.each(BACKENDS)('API keys across a restart of the service without Redis, on $name', (backend) => {
  const database = useTestDatabase(backend);
  const start = useTestApps();

  it('a revoked key stays refused, an expired one too, a live one keeps working', async (ctx) => {
    if (!backend.available) return ctx.skip();
    const clock = new ManualClock();
    const first = await start(backend, { SECRET_KEY }, { accounts: true, database, clock });
    const { session } = await signUp(first.app, 'kr');
    const live = await createApiKey(first.app, session);
    const revoked = await createApiKey(first.app, session);
    const expiring = await createApiKey(first.app, session, {
      name: 'short',
      expires_at: new Date(clock.now() + HOUR).toISOString(),
    });
    expect((await revokeApiKey(first.app, session.headers, revoked.id)).statusCode).toBe(204);
    await first.close(); // the process ends: its memory goes with it
    clock.advance(HOUR);
    const second = await start(backend, { SECRET_KEY }, { accounts: true, database, clock });
    expect((await meByKey(second.app, live.key)).statusCode).toBe(200);
    expectError(await meByKey(second.app, revoked.key), 401, 'Not authenticated');
    expectError(await meByKey(second.app, expiring.key), 401, 'Not authenticated');
  });
});
