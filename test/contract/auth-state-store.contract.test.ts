import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/adapters/redis/connect-redis.js';
import { RedisAuthStateStore } from '../../src/adapters/redis/redis-auth-state-store.js';
import { KyselyAuthStateStore } from '../../src/adapters/storage/kysely-auth-state-store.js';
import type { AuthStateStore } from '../../src/ports/auth-state-store.js';
import { ManualClock } from '../helpers/auth.js';
import { type Backend, BACKENDS } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';
import { useOpenDatabase } from '../helpers/storage.js';

const MINUTE = 60_000;
const redisUp = await redisAvailable();

interface Variant {
  readonly name: string;
  readonly backend: Backend;
  /** With the Redis copy in front of the database. */
  readonly redis: boolean;
}

const VARIANTS: readonly Variant[] = BACKENDS.flatMap((backend) => [
  { name: backend.name, backend, redis: false },
  { name: `${backend.name} + redis`, backend, redis: true },
]);

/** One contract, every way the service keeps revocations and lockouts. */
describe.each(VARIANTS)('AuthStateStore on $name', (variant) => {
  const available = variant.backend.available && (!variant.redis || redisUp);
  const { database } = useOpenDatabase(variant.backend, { when: available });
  const prefix = uniqueRedisPrefix('auth-state');
  const closers: Array<() => Promise<void>> = [];
  const clock = new ManualClock();

  /** A store on the shared database (and Redis prefix): what one instance, or one run of it, holds. */
  const open = (storeClock: ManualClock = clock): AuthStateStore => {
    const durable = new KyselyAuthStateStore(database.db, storeClock);
    if (!variant.redis) return durable;
    const store = new RedisAuthStateStore(durable, connectRedis(REDIS_URL, 'auth-state-test'), {
      keyPrefix: prefix,
      clock: storeClock,
    });
    closers.push(() => store.close());
    return store;
  };
  const id = () => randomUUID();

  afterAll(async () => {
    for (const close of closers.splice(0)) await close();
    if (available && variant.redis) await deleteRedisKeys(prefix);
  });

  it('revokes until the expiry, by the clock', async (ctx) => {
    if (!available) return ctx.skip();
    const store = open();
    const jti = id();
    expect(await store.isRevoked('token', jti)).toBe(false);
    await store.revoke('token', jti, clock.now() + 10 * MINUTE);
    expect(await store.isRevoked('token', jti)).toBe(true);
    expect(await store.isRevoked('token', id())).toBe(false);
    clock.advance(10 * MINUTE - 1);
    expect(await store.isRevoked('token', jti)).toBe(true);
    clock.advance(1);
    expect(await store.isRevoked('token', jti)).toBe(false);
  });

  it('keeps the later expiry when revoked twice, ignores one already past, and lifts', async (ctx) => {
    if (!available) return ctx.skip();
    const store = open();
    const jti = id();
    await store.revoke('token', jti, clock.now() + 10 * MINUTE);
    await store.revoke('token', jti, clock.now() + MINUTE);
    clock.advance(5 * MINUTE);
    expect(await store.isRevoked('token', jti)).toBe(true);
    const past = id();
    await store.revoke('token', past, clock.now() - 1);
    expect(await store.isRevoked('token', past)).toBe(false);
    await store.lift('token', jti);
    expect(await store.isRevoked('token', jti)).toBe(false);
  });

  it('counts failures in a sliding window, each failure moving its end', async (ctx) => {
    if (!available) return ctx.skip();
    const store = open();
    const who = `user-${id()}`;
    expect(await store.failures(who)).toBeUndefined();
    const start = clock.now();
    const first = await store.recordFailure(who, 15 * MINUTE);
    expect(first).toEqual({
      count: 1,
      ttlMs: 15 * MINUTE,
      expiresAtMs: start + 15 * MINUTE,
      version: expect.any(Number) as number,
    });
    clock.advance(10 * MINUTE);
    const second = await store.recordFailure(who, 15 * MINUTE);
    expect(second).toEqual({
      count: 2,
      ttlMs: 15 * MINUTE,
      expiresAtMs: start + 25 * MINUTE,
      version: expect.any(Number) as number,
    });
    expect(second.version).toBeGreaterThan(first.version);
    clock.advance(10 * MINUTE); // past the first failure's window, inside the second's
    expect(await store.failures(who)).toEqual({
      count: 2,
      ttlMs: 5 * MINUTE,
      expiresAtMs: start + 25 * MINUTE,
      version: second.version,
    });
    clock.advance(5 * MINUTE);
    expect(await store.failures(who)).toBeUndefined();
    const again = await store.recordFailure(who, 15 * MINUTE);
    expect(again.count).toBe(1);
    expect(again.version).toBeGreaterThan(second.version);
    const cleared = await store.clearFailures(who);
    expect(cleared).toEqual({
      count: 0,
      ttlMs: 15 * MINUTE,
      expiresAtMs: again.expiresAtMs,
      version: expect.any(Number),
    });
    expect(cleared!.version).toBeGreaterThan(again.version);
    expect(await store.failures(who)).toBeUndefined();
    expect(await store.clearFailures(`user-${id()}`)).toBeUndefined(); // nobody's failures: nothing to clear
  });

  it('counts concurrent failures exactly, from two instances', async (ctx) => {
    if (!available) return ctx.skip();
    const [a, b] = [open(), open()];
    const who = `user-${id()}`;
    const counts = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).recordFailure(who, 15 * MINUTE)),
    );
    expect(counts.map((w) => w.count).sort((x, y) => x - y)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect((await a.failures(who))?.count).toBe(40);
    expect((await b.failures(who))?.count).toBe(40);
  });

  it('counts concurrent failures exactly from two instances whose clocks differ, and keeps the later end', async (ctx) => {
    if (!available) return ctx.skip();
    // b's clock is 5 ms ahead of a's: b's failures end the window later, and a's, committed
    // after them with higher counts, must neither lose those counts nor shorten the window.
    const ahead = new ManualClock(clock.now() + 5);
    const [a, b] = [open(), open(ahead)];
    const who = `user-${id()}`;
    const windows = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).recordFailure(who, 15 * MINUTE)),
    );
    expect(windows.map((w) => w.count).sort((x, y) => x - y)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    const byCount = [...windows].sort((x, y) => x.count - y.count);
    for (let i = 1; i < byCount.length; i++) {
      expect(byCount[i]!.expiresAtMs).toBeGreaterThanOrEqual(byCount[i - 1]!.expiresAtMs);
      expect(byCount[i]!.version).toBeGreaterThan(byCount[i - 1]!.version); // the commits' order, whatever the clocks
    }
    const end = ahead.now() + 15 * MINUTE;
    const { version } = byCount[39]!;
    expect(await a.failures(who)).toEqual({ count: 40, ttlMs: end - clock.now(), expiresAtMs: end, version });
    expect(await b.failures(who)).toEqual({ count: 40, ttlMs: 15 * MINUTE, expiresAtMs: end, version });
  });

  it('orders a clearing after the failures it clears, and a window begun again after it, whatever the clocks', async (ctx) => {
    if (!available) return ctx.skip();
    // b's clock is a second ahead: its failure's version is above what a's clock gives a's clearing.
    const ahead = new ManualClock(clock.now() + 1000);
    const [a, b] = [open(), open(ahead)];
    const who = `user-${id()}`;
    const failed = await b.recordFailure(who, MINUTE);
    const cleared = await a.clearFailures(who);
    expect(cleared?.count).toBe(0);
    expect(cleared!.version).toBeGreaterThan(failed.version);
    expect(await a.failures(who)).toBeUndefined();
    expect(await b.failures(who)).toBeUndefined();
    expect((await a.recordFailure(who, MINUTE)).count).toBe(1); // counting starts again
    // Past the window, pruned: a record begun again has a version above every one of the old.
    const later = new ManualClock(ahead.now() + 2 * MINUTE);
    const pruner = open(later);
    await pruner.prune();
    const begun = await pruner.recordFailure(who, MINUTE);
    expect(begun.count).toBe(1);
    expect(begun.version).toBeGreaterThan(cleared!.version);
    expect((await open(later).failures(who))?.count).toBe(1);
  });

  it('shares revocations and failures with another instance, and keeps them for the next run', async (ctx) => {
    if (!available) return ctx.skip();
    const jti = id();
    const who = `user-${id()}`;
    const first = open();
    await first.revoke('token', jti, clock.now() + MINUTE);
    await first.recordFailure(who, MINUTE);
    const other = open();
    expect(await other.isRevoked('token', jti)).toBe(true);
    expect((await other.failures(who))?.count).toBe(1);
    await other.clearFailures(who);
    expect(await first.failures(who)).toBeUndefined();
  });

  it('prunes what has expired and nothing else', async (ctx) => {
    if (!available) return ctx.skip();
    // A day on: whatever the earlier tests left has expired, and goes first.
    const pruneClock = new ManualClock(clock.now() + 24 * 60 * MINUTE);
    const store = open(pruneClock);
    await store.prune();
    const [gone, kept] = [id(), id()];
    await store.revoke('token', gone, pruneClock.now() + MINUTE);
    await store.revoke('token', kept, pruneClock.now() + 10 * MINUTE);
    await store.recordFailure(`user-${gone}`, MINUTE);
    await store.recordFailure(`user-${kept}`, 10 * MINUTE);
    pruneClock.advance(MINUTE);
    expect(await store.prune()).toBe(2);
    expect(await store.prune()).toBe(0);
    expect(await store.isRevoked('token', kept)).toBe(true);
    expect((await store.failures(`user-${kept}`))?.count).toBe(1);
  });

  if (variant.redis) {
    it('keeps a copy in Redis, and answers from the database while Redis comes back empty, rebuilding the copy', async (ctx) => {
      if (!available) return ctx.skip();
      const redis = connectRedis(REDIS_URL, 'auth-state-test-probe');
      closers.push(async () => void (await redis.quit()));
      const store = open();
      const jti = id();
      const who = `user-${id()}`;
      await store.revoke('token', jti, clock.now() + 10 * MINUTE);
      await store.recordFailure(who, 10 * MINUTE);
      await store.recordFailure(who, 10 * MINUTE);
      expect(await redis.exists(`${prefix}auth:revoked:token:${jti}`)).toBe(1);

      await deleteRedisKeys(prefix); // what a restart of a Redis that keeps nothing on disk does
      expect(await store.isRevoked('token', jti)).toBe(true);
      expect((await store.failures(who))?.count).toBe(2);
      await eventually(async () => expect(await redis.exists(`${prefix}auth:seeded`)).toBe(1));
      expect(await redis.exists(`${prefix}auth:revoked:token:${jti}`)).toBe(1);
      expect(await redis.get(`${prefix}auth:failures:${who}`)).toMatch(/^2:/);
      expect(await open().isRevoked('token', jti)).toBe(true);
    });
  }
});
