/**
 * Revocations and lockouts survive: a restart of the service without Redis (they live in the
 * database), a restart of a Redis that keeps nothing on disk (its copy is rebuilt from the
 * database), and both across two instances sharing Redis, including a logout made while Redis
 * was away.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, useTestApp, useTestApps } from '../helpers/app.js';
import { login, loginRequest, ManualClock, me, newUser, registerUser, type Session } from '../helpers/auth.js';
import { BACKENDS, postgres, useTestDatabase } from '../helpers/backends.js';
import type { Injector } from '../helpers/http.js';
import { OwnRedisServer, redisServerBinaryAvailable } from '../helpers/own-redis-server.js';

const SECRET_KEY = 'durable-auth-state-secret-key-0123456789abcdef';

const logout = (app: Injector, session: Session) =>
  app.inject({ method: 'POST', url: '/api/v1/auth/logout', headers: session.headers });

/** A user with a session that was logged out, one still signed in, and a locked-out user. */
async function makeState(app: Injector) {
  const body = newUser('dur');
  await registerUser(app, body);
  const revoked = await login(app, body.username, body.password);
  const live = await login(app, body.username, body.password);
  expect((await logout(app, revoked)).statusCode).toBe(200);
  const lockedUser = newUser('durl');
  await registerUser(app, lockedUser);
  for (let i = 0; i < 5; i++)
    expect((await loginRequest(app, lockedUser.username, 'wrong password!')).statusCode).toBe(401);
  return { revoked, live, locked: lockedUser };
}

/** The state holds on `app`: the logged-out token is refused, the other works, the lockout stands. */
async function expectStateHolds(app: Injector, state: Awaited<ReturnType<typeof makeState>>) {
  expect((await me(app, state.revoked.cookie)).statusCode).toBe(401);
  expect((await me(app, state.live.cookie)).statusCode).toBe(200);
  const attempt = await loginRequest(app, state.locked.username, state.locked.password);
  expect(attempt.statusCode, attempt.body).toBe(423);
}

describe.each(BACKENDS)(
  'revocations and lockouts across a restart of the service without Redis, on $name',
  (backend) => {
    const database = useTestDatabase(backend);
    const start = useTestApps();

    it('keeps the logged-out token refused and the lockout in force', async (ctx) => {
      if (!backend.available) return ctx.skip();
      const clock = new ManualClock();
      const first = await start(backend, { SECRET_KEY }, { accounts: true, database, clock });
      const state = await makeState(first.app);
      await first.close(); // the process ends: its memory goes with it
      const second = await start(backend, { SECRET_KEY }, { accounts: true, database, clock });
      await expectStateHolds(second.app, state);
    });
  },
);

describe.skipIf(!redisServerBinaryAvailable() || !postgres.available)(
  'revocations and lockouts with Redis restarting empty, two instances sharing it',
  () => {
    let redis: OwnRedisServer;
    beforeAll(async () => {
      redis = await OwnRedisServer.create();
      await redis.start();
    });
    afterAll(async () => {
      await redis?.stop();
    });
    const database = useTestDatabase(postgres);
    const env = () => ({ SECRET_KEY, REDIS_URL: redis.url, REDIS_TIMEOUT_MS: '200' });
    const clock = new ManualClock();
    let a: TestApp = useTestApp(postgres, env, { accounts: true, database, clock });
    const b = useTestApp(postgres, env, { accounts: true, database, clock });
    const start = useTestApps();
    afterEach(async () => {
      await redis?.start();
    });

    it('holds on both instances after Redis restarts empty', async () => {
      const state = await makeState(a.app);
      await expectStateHolds(b.app, state);
      await redis.stop();
      await redis.start();
      await expectStateHolds(a.app, state);
      await expectStateHolds(b.app, state);
    });

    it('holds a logout and a lockout made while Redis was away, before and after it comes back', async () => {
      const body = newUser('dura');
      await registerUser(a.app, body);
      const session = await login(a.app, body.username, body.password);
      await redis.stop();
      expect((await logout(b.app, session)).statusCode).toBe(200);
      const state = { ...(await makeState(b.app)), revoked: session };
      await expectStateHolds(a.app, state);
      await redis.start();
      await expectStateHolds(a.app, state);
      await expectStateHolds(b.app, state);
    });

    it('holds across a restart of an instance too', async () => {
      const state = await makeState(a.app);
      await a.close();
      await redis.stop();
      await redis.start();
      a = await start(postgres, { SECRET_KEY, REDIS_URL: redis.url }, { accounts: true, database, clock: b.clock });
      await expectStateHolds(a.app, state);
      await expectStateHolds(b.app, state);
    });
  },
);
