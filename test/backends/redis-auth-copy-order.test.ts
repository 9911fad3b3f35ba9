import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/adapters/redis/connect-redis.js';
import { RedisAuthStateStore } from '../../src/adapters/redis/redis-auth-state-store.js';
import type { RedisCalls } from '../../src/adapters/redis/redis-link.js';
import { KyselyAuthStateStore } from '../../src/adapters/storage/kysely-auth-state-store.js';
import { BACKENDS } from '../helpers/backends.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';
import { useOpenDatabase } from '../helpers/storage.js';

const WINDOW_MS = 15 * 60_000;
const redisUp = await redisAvailable();

/**
 * Two instances share lockouts through the database and the Redis copy. One counts a failed login
 * (the database commits it) while another clears the failures (a successful login, an admin's
 * unlock), and the first one's copy reaches Redis only after the clearing's: the copy must not
 * bring the cleared count back, which would lock the account on every instance for the rest of
 * the window while the database holds no failure. Real Redis and the real databases; the late
 * copy is a call held by the first instance's RedisCalls until the clearing is done.
 */
describe.each(BACKENDS)('RedisAuthStateStore on $name: a failure copied after a clearing', (backend) => {
  const available = backend.available && redisUp;
  const { database } = useOpenDatabase(backend, { when: available });
  const prefix = uniqueRedisPrefix('auth-copy-order');
  const closers: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const close of closers.splice(0)) await close();
    if (available) await deleteRedisKeys(prefix);
  });

  /** An instance whose next Redis call waits, once `hold()` was called, for `release()`. */
  const instance = () => {
    const gate = { held: undefined as Promise<void> | undefined, reached: () => {} };
    let release = () => {};
    const calls: RedisCalls = {
      call: async (operation) => {
        const held = gate.held;
        gate.held = undefined;
        if (held) {
          gate.reached();
          await held;
        }
        return operation();
      },
    };
    const store = new RedisAuthStateStore(
      new KyselyAuthStateStore(database.db),
      connectRedis(REDIS_URL, 'auth-copy-order-test'),
      { keyPrefix: prefix, calls },
    );
    closers.push(() => {
      release();
      return store.close();
    });
    /** Holds the next call; resolves once it is waiting (for a change: its database part is done). */
    const hold = () => {
      gate.held = new Promise<void>((resolve) => (release = resolve));
      return new Promise<void>((resolve) => (gate.reached = resolve));
    };
    return { store, hold, release: () => release() };
  };

  it('the failures stay cleared on every instance, and the next failure counts from 1', async (ctx) => {
    if (!available) return ctx.skip();
    const [a, b] = [instance(), instance()];
    const subject = `user-${randomUUID()}`;
    await a.store.rebuild(); // the copy complete: reads come from Redis
    for (let i = 1; i <= 4; i++) expect((await a.store.recordFailure(subject, WINDOW_MS)).count).toBe(i);

    const copying = a.hold();
    const fifth = a.store.recordFailure(subject, WINDOW_MS);
    await copying; // committed; its copy not yet sent
    await b.store.clearFailures(subject);
    a.release();
    expect((await fifth).count).toBe(5);

    expect(await a.store.failures(subject)).toBeUndefined();
    expect(await b.store.failures(subject)).toBeUndefined();
    expect(await instance().store.failures(subject)).toBeUndefined();
    // Answered by the copy, which holds the cleared record.
    const redis = connectRedis(REDIS_URL, 'auth-copy-order-check');
    closers.push(() => redis.quit().then(() => undefined));
    expect(await redis.exists(`${prefix}auth:seeded`)).toBe(1);
    expect(await redis.get(`${prefix}auth:failures:${subject}`)).toMatch(/^0:/);
    expect((await b.store.recordFailure(subject, WINDOW_MS)).count).toBe(1);
    expect((await a.store.failures(subject))?.count).toBe(1);
  });
});
