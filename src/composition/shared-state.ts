import cluster from 'node:cluster';
import { ClusterCounters, type CounterChannel } from '../adapters/counters/cluster-counters.js';
import { MemoryCounters } from '../adapters/counters/memory-counters.js';
import { RedisCounters } from '../adapters/counters/redis-counters.js';
import { MemoryRateLimiter } from '../adapters/rate-limit/memory-rate-limiter.js';
import { RedisRateLimiter } from '../adapters/rate-limit/redis-rate-limiter.js';
import { RedisAuthStateStore } from '../adapters/redis/redis-auth-state-store.js';
import { RedisLink } from '../adapters/redis/redis-link.js';
import type { Database } from '../adapters/storage/database.js';
import { KyselyAuthStateStore } from '../adapters/storage/kysely-auth-state-store.js';
import type { AuthStateStore } from '../ports/auth-state-store.js';
import type { Counters } from '../ports/counters.js';
import type { RateLimiter } from '../ports/rate-limiter.js';
import { PeriodicTask } from '../support/periodic-task.js';
import type { CompositionContext } from './context.js';

/** How often expired revocations and login failures are deleted from the database. */
const AUTH_STATE_PRUNE_INTERVAL_MS = 60_000;

/** State every instance must agree on. */
export interface SharedState {
  /** Redis, when configured. */
  readonly redis?: RedisLink;
  readonly counters: Counters;
  /** Whether every instance sees `counters` (Redis, or the primary of `--workers N`), or only this process. */
  readonly countersShared: boolean;
  readonly rateLimiter: RateLimiter;
  /** Revocations and lockouts. */
  readonly authState: AuthStateStore;
}

/**
 * State every instance must agree on: Redis when configured (rate limits, counters, and a fast
 * copy of the revocations and lockouts), the revocations and lockouts recorded in the database,
 * and their pruning. Without Redis, rate limits are this process's own, and so are counters
 * (those of `--workers N` are kept by the cluster's primary for all its serving processes).
 */
export function composeSharedState(context: CompositionContext, database: Database): SharedState {
  const { config, logger, stack, clock, givenClock } = context;
  const redis = config.redisUrl
    ? new RedisLink({ url: config.redisUrl, timeoutMs: config.redisTimeoutMs, logger })
    : undefined;
  const rateLimiter = stack.use(
    'rate limiter',
    redis
      ? new RedisRateLimiter(redis.connect('rate-limit'), { keyPrefix: config.redisKeyPrefix, calls: redis })
      : new MemoryRateLimiter(givenClock ? { now: () => givenClock.now() } : {}),
  );
  const counters = stack.use(
    'counters',
    redis
      ? new RedisCounters(redis.connect('counters'), config.redisKeyPrefix, redis)
      : // A serving process of `--workers N`: the primary keeps them for all (src/cluster.ts).
        cluster.isWorker
        ? new ClusterCounters(process as unknown as CounterChannel)
        : new MemoryCounters(clock),
  );
  if (redis) stack.use('redis', redis);
  // Recorded in the database (kept across restarts); Redis holds a fast copy, rebuilt when it comes back.
  const durableState = new KyselyAuthStateStore(database.db, clock);
  const redisState =
    redis &&
    stack.use(
      'redis auth state',
      new RedisAuthStateStore(durableState, redis.connect('auth-state'), {
        keyPrefix: config.redisKeyPrefix,
        calls: redis,
        clock,
        onRebuildFailed: (error) => logger.warn({ err: error }, 'rebuilding the Redis copy of revocations failed'),
      }),
    );
  redis?.onBack(() => void redisState?.rebuild().catch(() => undefined));
  const authState: AuthStateStore = redisState ?? durableState;
  const pruning = new PeriodicTask('auth state pruning', AUTH_STATE_PRUNE_INTERVAL_MS, () => authState.prune(), logger);
  stack.defer('auth state pruning', () => pruning.stop());
  pruning.start();
  return { redis, counters, countersShared: Boolean(redis) || cluster.isWorker, rateLimiter, authState };
}
