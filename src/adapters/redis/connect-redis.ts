import { createRequire } from 'node:module';
import type { Redis } from 'ioredis';

/**
 * ioredis, loaded by the first connection (and left out of the bundle, as before): a process
 * without Redis, the embedded default, no longer loads it at start (about 20 ms). Tracing patches
 * it as it is required (src/adapters/telemetry/tracing.ts).
 */
function loadRedis(): typeof Redis {
  return (createRequire(import.meta.url)('ioredis') as typeof import('ioredis')).Redis;
}

/** REDIS_TIMEOUT_MS's default, for callers without the configuration (tests, tools). */
export const DEFAULT_REDIS_TIMEOUT_MS = 500;

export interface ConnectRedisOptions {
  /** Deadline of every command; connecting may take four times as long (at least 1 s). */
  readonly timeoutMs?: number;
}

/**
 * Opens a Redis connection for one concern (counters, rate limits, …). Every command has a
 * deadline and nothing waits for a server that is away: commands issued while disconnected are
 * queued only until the next reconnection attempt fails (at most 2 s, `maxRetriesPerRequest: 0`),
 * and each fails at its deadline anyway. The client reconnects by itself. Errors are listened
 * to here (no "Unhandled error event"); a RedisLink reports them.
 */
export function connectRedis(url: string, name: string, options: ConnectRedisOptions = {}): Redis {
  const timeoutMs = options.timeoutMs ?? DEFAULT_REDIS_TIMEOUT_MS;
  const RedisClient = loadRedis();
  const client = new RedisClient(url, {
    connectionName: `urlshortener:${name}`,
    commandTimeout: timeoutMs,
    connectTimeout: Math.max(1000, 4 * timeoutMs),
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    enableOfflineQueue: true,
    lazyConnect: false,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2000),
  });
  client.on('error', () => undefined);
  return client;
}
