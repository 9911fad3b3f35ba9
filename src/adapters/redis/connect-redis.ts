import { Redis } from 'ioredis';

/**
 * Opens a Redis connection for one concern (counters, rate limits, …). Commands fail fast while
 * the server is away instead of queueing without bound; the client reconnects by itself.
 */
export function connectRedis(url: string, name: string): Redis {
  return new Redis(url, {
    connectionName: `urlshortener:${name}`,
    maxRetriesPerRequest: 2,
    enableOfflineQueue: true,
    lazyConnect: false,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2000),
  });
}
