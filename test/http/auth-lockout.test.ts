import { describe, expect, it } from 'vitest';
import { adminEnv, useTestApp } from '../helpers/app.js';
import { BACKENDS } from '../helpers/backends.js';
import { expectError } from '../helpers/http.js';
import { login, loginRequest, metricValue, newUser, registerUser } from '../helpers/auth.js';

const LOCKED = 'Account locked due to too many failed attempts';
const INVALID = 'Invalid username or password';
const MINUTE = 60_000;

/** Spec §5.5 and the design's lockout rules, with the clock moved by hand. */
describe.each(BACKENDS)('login lockout on $name', (backend) => {
  const admin = { username: 'lock_admin', email: 'lock_admin@example.com', password: 'admin password 1' };
  const t = useTestApp(backend, adminEnv(admin), { accounts: true });

  const account = async () => {
    const body = newUser('lk');
    await registerUser(t.app, body);
    return body;
  };
  const fail = async (username: string, times: number) => {
    for (let i = 0; i < times; i++) expectError(await loginRequest(t.app, username, 'wrong password!'), 401, INVALID);
  };
  const expectLocked = async (username: string, password: string, retryAfter: number) => {
    const response = await loginRequest(t.app, username, password);
    expectError(response, 423, LOCKED);
    expect(response.headers['retry-after']).toBe(String(retryAfter));
    expect(response.headers['set-cookie']).toBeUndefined();
  };

  it.skipIf(!backend.available)(
    'failures 1–5 answer 401; the 6th attempt is 423 even with the right password',
    async () => {
      const { username, password } = await account();
      await fail(username, 5);
      await expectLocked(username, password, 15 * 60);
      await expectLocked(username, 'wrong password!', 15 * 60);
    },
  );

  it.skipIf(!backend.available)(
    'the lock ends lockout_duration_minutes after the last failure; 423s do not extend it',
    async () => {
      const { username, password } = await account();
      await fail(username, 5);
      t.clock.advance(10 * MINUTE);
      await expectLocked(username, password, 5 * 60);
      t.clock.advance(5 * MINUTE - 1000);
      await expectLocked(username, password, 1);
      t.clock.advance(1000);
      await login(t.app, username, password);
    },
  );

  it.skipIf(!backend.available)(
    'each failure restarts the window (sliding): failures spread over 40 minutes still lock',
    async () => {
      const { username, password } = await account();
      for (let i = 0; i < 5; i++) {
        await fail(username, 1);
        t.clock.advance(10 * MINUTE); // under 15 minutes since the previous failure
      }
      // 5 failures over 50 minutes, none 15 minutes after the one before: locked, 5 minutes left.
      await expectLocked(username, password, 5 * 60);
    },
  );

  it.skipIf(!backend.available)('failures further apart than the window do not add up', async () => {
    const { username, password } = await account();
    await fail(username, 4);
    t.clock.advance(15 * MINUTE);
    await fail(username, 4); // counts from 1 again
    await login(t.app, username, password);
  });

  it.skipIf(!backend.available)('a successful login resets the count', async () => {
    const { username, password } = await account();
    await fail(username, 4);
    await login(t.app, username, password);
    await fail(username, 5);
    await expectLocked(username, password, 15 * 60);
  });

  it.skipIf(!backend.available)('unknown usernames lock the same way, with the same answers', async () => {
    const ghost = newUser('ghost').username;
    await fail(ghost, 5);
    await expectLocked(ghost, 'any password at all', 15 * 60);
    t.clock.advance(15 * MINUTE);
    expectError(await loginRequest(t.app, ghost, 'any password at all'), 401, INVALID);
  });

  it.skipIf(!backend.available)('counts per username: locking one leaves others alone', async () => {
    const locked = await account();
    const other = await account();
    await fail(locked.username, 5);
    await expectLocked(locked.username, locked.password, 15 * 60);
    await login(t.app, other.username, other.password);
  });

  it.skipIf(!backend.available)('form logins count and lock the same way', async () => {
    const { username, password } = await account();
    const form = (pw: string) =>
      t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/login',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ username, password: pw }).toString(),
      });
    for (let i = 0; i < 5; i++) expectError(await form('wrong password!'), 401, INVALID);
    const response = await form(password);
    expectError(response, 423, LOCKED);
    expect(response.headers['retry-after']).toBe('900');
  });

  it.skipIf(!backend.available)('counts failures and lockouts in /metrics', async () => {
    const before = {
      invalid: await metricValue(t.app, 'login_failures_total', { reason: 'invalid_credentials' }),
      locked: await metricValue(t.app, 'login_failures_total', { reason: 'locked' }),
      lockouts: await metricValue(t.app, 'login_lockouts_total'),
    };
    const { username, password } = await account();
    await fail(username, 5);
    await expectLocked(username, password, 900);
    await expectLocked(username, password, 900);
    expect(await metricValue(t.app, 'login_failures_total', { reason: 'invalid_credentials' })).toBe(
      before.invalid + 5,
    );
    expect(await metricValue(t.app, 'login_failures_total', { reason: 'locked' })).toBe(before.locked + 2);
    expect(await metricValue(t.app, 'login_lockouts_total')).toBe(before.lockouts + 1);
  });

  it.skipIf(!backend.available)(
    'follows runtime changes of max_login_attempts and lockout_duration_minutes',
    async () => {
      const adminSession = await login(t.app, admin.username, admin.password);
      const patch = (body: unknown) =>
        t.app.inject({
          method: 'PATCH',
          url: '/api/v1/admin/settings',
          headers: { ...adminSession.headers, 'content-type': 'application/json' },
          payload: JSON.stringify(body),
        });
      expect((await patch({ max_login_attempts: 3, lockout_duration_minutes: 2 })).statusCode).toBe(200);
      try {
        const { username, password } = await account();
        await fail(username, 3);
        await expectLocked(username, password, 120);
        t.clock.advance(2 * MINUTE);
        await login(t.app, username, password);
      } finally {
        expect((await patch({ max_login_attempts: 5, lockout_duration_minutes: 15 })).statusCode).toBe(200);
      }
    },
  );
});
