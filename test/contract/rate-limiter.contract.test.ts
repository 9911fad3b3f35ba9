import { afterAll, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/adapters/redis/connect-redis.js';
import { MemoryRateLimiter } from '../../src/adapters/rate-limit/memory-rate-limiter.js';
import { RedisRateLimiter } from '../../src/adapters/rate-limit/redis-rate-limiter.js';
import type {
  RateLimitAlgorithm,
  RateLimitDecision,
  RateLimiter,
  RateLimitPolicy,
} from '../../src/ports/rate-limiter.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';

/** A hand-driven clock, in milliseconds; starts on a multiple of every window used here. */
class FakeClock {
  ms = 3_000_000_000_000;
  readonly now = () => this.ms;
  advance(ms: number): void {
    this.ms += ms;
  }
}

interface Subject {
  readonly name: string;
  readonly available: () => Promise<boolean>;
  /** A limiter on `clock`, or on the store's own clock when none is given. */
  create(clock?: FakeClock): RateLimiter;
  cleanup(): Promise<void>;
}

const redisPrefix = uniqueRedisPrefix('rate-limiter');
const opened: RateLimiter[] = [];

const SUBJECTS: readonly Subject[] = [
  {
    name: 'memory',
    available: async () => true,
    create: (clock) => new MemoryRateLimiter(clock ? { now: clock.now } : {}),
    cleanup: async () => {},
  },
  {
    name: 'redis',
    available: redisAvailable,
    create: (clock) =>
      new RedisRateLimiter(connectRedis(REDIS_URL, 'rate-limiter-test'), {
        keyPrefix: redisPrefix,
        ...(clock ? { now: clock.now } : {}),
      }),
    cleanup: () => deleteRedisKeys(redisPrefix),
  },
];

let keyCounter = 0;
/** A client key no other test uses. */
const freshKey = () => `client-${++keyCounter}`;

function policy(algorithm: RateLimitAlgorithm, limit: number, windowMs: number, name = 'test'): RateLimitPolicy {
  return { name, limit, windowMs, algorithm };
}

async function consumeMany(
  limiter: RateLimiter,
  key: string,
  p: RateLimitPolicy,
  n: number,
): Promise<RateLimitDecision[]> {
  const decisions: RateLimitDecision[] = [];
  for (let i = 0; i < n; i++) decisions.push(await limiter.consume(key, p));
  return decisions;
}

for (const subject of SUBJECTS) {
  describe(`RateLimiter contract: ${subject.name}`, async () => {
    const available = await subject.available();
    const track = (limiter: RateLimiter) => {
      opened.push(limiter);
      return limiter;
    };

    afterAll(async () => {
      await Promise.all(opened.splice(0).map((l) => l.close()));
      if (available) await subject.cleanup();
    });

    for (const algorithm of ['token_bucket', 'sliding_window'] as const) {
      describe(algorithm, () => {
        it.skipIf(!available)('admits exactly the limit, then refuses with a retry time', async () => {
          const clock = new FakeClock();
          const limiter = track(subject.create(clock));
          const p = policy(algorithm, 5, 60_000);
          const key = freshKey();
          const admitted = await consumeMany(limiter, key, p, 5);
          expect(admitted.map((d) => d.allowed)).toEqual([true, true, true, true, true]);
          expect(admitted.map((d) => d.remaining)).toEqual([4, 3, 2, 1, 0]);
          for (const d of admitted) {
            expect(d.limit).toBe(5);
            expect(d.retryAfterMs).toBe(0);
            expect(d.resetMs).toBeGreaterThan(0);
            expect(d.resetMs).toBeLessThanOrEqual(120_000);
          }
          const refused = await consumeMany(limiter, key, p, 3);
          for (const d of refused) {
            expect(d).toMatchObject({ allowed: false, limit: 5, remaining: 0 });
            expect(d.retryAfterMs).toBeGreaterThan(0);
            expect(d.retryAfterMs).toBeLessThanOrEqual(120_000);
          }
        });

        it.skipIf(!available)('counts each key and each policy on its own', async () => {
          const clock = new FakeClock();
          const limiter = track(subject.create(clock));
          const a = policy(algorithm, 2, 60_000, 'a');
          const b = policy(algorithm, 2, 60_000, 'b');
          const key = freshKey();
          const other = freshKey();
          expect((await consumeMany(limiter, key, a, 3)).map((d) => d.allowed)).toEqual([true, true, false]);
          expect((await consumeMany(limiter, other, a, 2)).map((d) => d.allowed)).toEqual([true, true]);
          expect((await consumeMany(limiter, key, b, 2)).map((d) => d.allowed)).toEqual([true, true]);
        });

        it.skipIf(!available)('is admitted again after waiting the announced retry time', async () => {
          const clock = new FakeClock();
          const limiter = track(subject.create(clock));
          const p = policy(algorithm, 3, 3_000);
          const key = freshKey();
          await consumeMany(limiter, key, p, 3);
          const refused = await limiter.consume(key, p);
          expect(refused.allowed).toBe(false);
          clock.advance(refused.retryAfterMs - 1);
          expect((await limiter.consume(key, p)).allowed).toBe(false);
          clock.advance(1);
          expect((await limiter.consume(key, p)).allowed).toBe(true);
        });
      });
    }

    it.skipIf(!available)('token bucket: refills limit/window tokens evenly, up to the limit', async () => {
      const clock = new FakeClock();
      const limiter = track(subject.create(clock));
      const p = policy('token_bucket', 3, 3_000); // one token a second
      const key = freshKey();
      expect((await consumeMany(limiter, key, p, 4)).map((d) => d.allowed)).toEqual([true, true, true, false]);
      clock.advance(999);
      expect((await limiter.consume(key, p)).allowed).toBe(false);
      clock.advance(1); // one token
      expect(await limiter.consume(key, p)).toMatchObject({ allowed: true, remaining: 0 });
      expect((await limiter.consume(key, p)).allowed).toBe(false);
      clock.advance(2_000); // two tokens
      expect((await consumeMany(limiter, key, p, 3)).map((d) => d.allowed)).toEqual([true, true, false]);
      clock.advance(60_000); // a long pause refills to the limit, not beyond
      const afterPause = await consumeMany(limiter, key, p, 4);
      expect(afterPause.map((d) => d.allowed)).toEqual([true, true, true, false]);
      expect(afterPause[0]!.remaining).toBe(2);
    });

    it.skipIf(!available)('sliding window: the previous window weighs in as it slides out', async () => {
      const clock = new FakeClock();
      const limiter = track(subject.create(clock));
      const p = policy('sliding_window', 4, 1_000);
      const key = freshKey();
      expect((await consumeMany(limiter, key, p, 5)).map((d) => d.allowed)).toEqual([true, true, true, true, false]);
      clock.advance(1_000); // next window: the previous one still weighs 4 × 100%
      const refused = await limiter.consume(key, p);
      expect(refused.allowed).toBe(false);
      expect(refused.retryAfterMs).toBe(250); // 4 × 75% + 1 ≤ 4 at 250 ms
      clock.advance(250); // 4 × 75% = 3 used: room for one
      expect((await consumeMany(limiter, key, p, 2)).map((d) => d.allowed)).toEqual([true, false]);
      clock.advance(500); // 4 × 25% + 1 = 2 used: room for two
      expect((await consumeMany(limiter, key, p, 3)).map((d) => d.allowed)).toEqual([true, true, false]);
      clock.advance(2_000); // two windows later, nothing counts any more
      expect((await consumeMany(limiter, key, p, 5)).map((d) => d.allowed)).toEqual([true, true, true, true, false]);
    });

    it.skipIf(!available)(
      'on the store clock: refuses at the limit and admits again after the retry time',
      async () => {
        const limiter = track(subject.create());
        const p = policy('token_bucket', 2, 400);
        const key = freshKey();
        const decisions = await consumeMany(limiter, key, p, 3);
        expect(decisions.map((d) => d.allowed)).toEqual([true, true, false]);
        await new Promise((resolve) => setTimeout(resolve, decisions[2]!.retryAfterMs + 50));
        expect((await limiter.consume(key, p)).allowed).toBe(true);
      },
    );

    it.skipIf(!available)('admits exactly the limit across two limiters under 50 concurrent requests', async () => {
      for (const algorithm of ['token_bucket', 'sliding_window'] as const) {
        const one = track(subject.create());
        // The memory adapter is one process's state: its "instances" share one limiter.
        const two = subject.name === 'memory' ? one : track(subject.create());
        const p = policy(algorithm, 20, 60_000);
        const key = freshKey();
        const decisions = await Promise.all(
          Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? one : two).consume(key, p)),
        );
        expect(decisions.filter((d) => d.allowed)).toHaveLength(20);
      }
    });
  });
}
