import { randomBytes } from 'node:crypto';
import { connectRedis } from '../../src/adapters/redis/connect-redis.js';
import { REDIS_URL } from './services.js';

/** A key prefix no other test run uses. */
export function uniqueRedisPrefix(suite: string): string {
  return `test:${suite}:${randomBytes(6).toString('hex')}:`;
}

/** Deletes every key under `prefix` (tests leave versions behind, which never expire). */
export async function deleteRedisKeys(prefix: string): Promise<void> {
  const redis = connectRedis(REDIS_URL, 'test-cleanup');
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    await redis.quit();
  }
}
