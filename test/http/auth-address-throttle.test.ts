/**
 * Per-address throttling of failed logins (issue 16), besides the spec's per-username lockout,
 * which stays exactly as spec §5.5 says: one client address may fail `LOGIN_ADDRESS_MAX_FAILURES`
 * times within `LOGIN_ADDRESS_WINDOW_MINUTES`, over every username; then its logins answer 429
 * `{detail}` with `Retry-After`, while other addresses sign in as before. In memory, and shared by
 * two instances through Redis.
 */
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { type TestApp, useTestApp } from '../helpers/app.js';
import { sqlite } from '../helpers/backends.js';
import { expectError } from '../helpers/http.js';
import { metricValue, newUser, registerUser } from '../helpers/auth.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';

const THROTTLED = 'Too many failed logins from this address; try again later';
const INVALID = 'Invalid username or password';
const LOCKED = 'Account locked due to too many failed attempts';
const SETTINGS = { LOGIN_ADDRESS_MAX_FAILURES: '3', LOGIN_ADDRESS_WINDOW_MINUTES: '2' };

function attempt(t: Pick<TestApp, 'app'>, address: string, username: string, password: string) {
  return t.app.inject({
    method: 'POST',
    url: '/api/v1/auth/login',
    remoteAddress: address,
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify({ username, password }),
  });
}

function expectThrottled(response: LightMyRequestResponse, maxSeconds: number) {
  expectError(response, 429, THROTTLED);
  const retryAfter = Number(response.headers['retry-after']);
  expect(retryAfter).toBeGreaterThan(0);
  expect(retryAfter).toBeLessThanOrEqual(maxSeconds);
  expect(response.headers['set-cookie']).toBeUndefined();
}

describe('failed logins per client address, in memory', () => {
  const t = useTestApp(sqlite, SETTINGS, { accounts: true });
  const alice = newUser('thr');
  const bob = newUser('thr');

  it('creates the accounts', async () => {
    await registerUser(t.app, alice);
    await registerUser(t.app, bob);
  });

  it('refuses an address after 3 failures over any usernames, right password or not; others sign in', async () => {
    const before = await metricValue(t.app, 'login_failures_total', { reason: 'throttled' });
    expectError(await attempt(t, '203.0.113.1', alice.username, 'wrong 1'), 401, INVALID);
    expectError(await attempt(t, '203.0.113.1', bob.username, 'wrong 2'), 401, INVALID);
    expectError(await attempt(t, '203.0.113.1', 'nobody_here', 'wrong 3'), 401, INVALID);
    expectThrottled(await attempt(t, '203.0.113.1', alice.username, alice.password), 120);
    expectThrottled(await attempt(t, '203.0.113.1', 'nobody_else', 'x'), 120);
    expect(await metricValue(t.app, 'login_failures_total', { reason: 'throttled' })).toBe(before + 2);
    // Another address is not affected, nor are the accounts (one failure each: no lockout).
    expect((await attempt(t, '203.0.113.2', alice.username, alice.password)).statusCode).toBe(200);
    expect((await attempt(t, '2001:db8::7', bob.username, bob.password)).statusCode).toBe(200);
  });

  it('lets the address try again once the window has passed since its last counted failure', async () => {
    t.clock.advance(60_000);
    // Refused attempts do not extend the wait.
    expectThrottled(await attempt(t, '203.0.113.1', alice.username, alice.password), 60);
    t.clock.advance(60_001);
    expect((await attempt(t, '203.0.113.1', alice.username, alice.password)).statusCode).toBe(200);
  });

  it('does not reset on a success: a guesser cannot clear it by signing in to an account of its own', async () => {
    expectError(await attempt(t, '203.0.113.3', alice.username, 'wrong a'), 401);
    expectError(await attempt(t, '203.0.113.3', alice.username, 'wrong b'), 401);
    expect((await attempt(t, '203.0.113.3', bob.username, bob.password)).statusCode).toBe(200);
    expectError(await attempt(t, '203.0.113.3', alice.username, 'wrong c'), 401);
    expectThrottled(await attempt(t, '203.0.113.3', bob.username, bob.password), 120);
  });

  it('leaves the per-username lockout as the spec says: failures from many addresses lock the account', async () => {
    const carol = newUser('thr');
    await registerUser(t.app, carol);
    for (let i = 1; i <= 5; i++) {
      expectError(await attempt(t, `198.51.100.${i}`, carol.username, 'wrong'), 401, INVALID);
    }
    expectError(await attempt(t, '198.51.100.9', carol.username, carol.password), 423, LOCKED);
  });
});

describe('failed logins per client address, with the throttle off', () => {
  const t = useTestApp(sqlite, { LOGIN_ADDRESS_MAX_FAILURES: '0' }, { accounts: true });

  it('counts nothing per address: only the per-username lockout answers', async () => {
    for (let i = 0; i < 12; i++) {
      expectError(await attempt(t, '203.0.113.1', `nobody${i % 2}`, 'wrong'), i < 10 ? 401 : 423);
    }
  });
});

const redis = await redisAvailable();

describe('failed logins per client address, shared by two instances through Redis', () => {
  const prefix = uniqueRedisPrefix('login-throttle');
  afterAll(async () => {
    if (redis) await deleteRedisKeys(prefix);
  });
  const env = { ...SETTINGS, REDIS_URL, REDIS_KEY_PREFIX: prefix };
  const a = useTestApp(sqlite, env, { accounts: true, when: redis });
  const b = useTestApp(sqlite, env, { accounts: true, when: redis });

  it.skipIf(!redis)('failures through one instance throttle the address on the other', async () => {
    const dave = newUser('thr');
    await registerUser(b.app, dave);
    expectError(await attempt(a, '192.0.2.44', 'nobody1', 'wrong'), 401);
    expectError(await attempt(b, '192.0.2.44', 'nobody2', 'wrong'), 401);
    expectError(await attempt(a, '192.0.2.44', 'nobody3', 'wrong'), 401);
    expectThrottled(await attempt(b, '192.0.2.44', dave.username, dave.password), 120);
    expect((await attempt(b, '192.0.2.45', dave.username, dave.password)).statusCode).toBe(200);
  });
});
