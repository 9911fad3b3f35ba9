import type { Redis } from 'ioredis';
import type { Counters, CounterState } from '../../ports/counters.js';
import { DIRECT_CALLS, type RedisCalls } from '../redis/redis-link.js';

// Read-modify-write steps run as Lua so that each is atomic across every instance.
const INCREMENT = `
local count = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return count`;

const READ = `
local value = redis.call('GET', KEYS[1])
if not value then return false end
return { value, redis.call('PTTL', KEYS[1]) }`;

/** The slice of ioredis this adapter uses, plus the Lua commands it defines. */
type ScriptedRedis = Redis & {
  countersIncrement(key: string, ttlMs: number): Promise<number>;
  countersRead(key: string): Promise<[string, number] | null>;
};

/**
 * Counters in Redis, shared by every instance. Each key is `prefix + key`, so several deployments
 * (or test runs) can share one Redis. Expiry is Redis's own (PEXPIRE / SET PX). Commands go
 * through `calls` (a RedisLink: deadlines, fast failure while Redis is away).
 */
export class RedisCounters implements Counters {
  private readonly redis: ScriptedRedis;

  /** Takes ownership of `redis`: `close()` ends the connection. */
  constructor(
    redis: Redis,
    private readonly prefix: string,
    private readonly calls: RedisCalls = DIRECT_CALLS,
  ) {
    redis.defineCommand('countersIncrement', { numberOfKeys: 1, lua: INCREMENT });
    redis.defineCommand('countersRead', { numberOfKeys: 1, lua: READ });
    this.redis = redis as ScriptedRedis;
  }

  increment(key: string, ttlMs: number): Promise<number> {
    return this.calls.call(() => this.redis.countersIncrement(this.prefix + key, Math.max(1, Math.ceil(ttlMs))));
  }

  async get(key: string): Promise<CounterState | undefined> {
    const found = await this.calls.call(() => this.redis.countersRead(this.prefix + key));
    if (found === null) return undefined;
    const [value, ttl] = found;
    return { count: Number(value), ttlMs: ttl < 0 ? Number.POSITIVE_INFINITY : ttl };
  }

  async delete(key: string): Promise<void> {
    await this.calls.call(() => this.redis.del(this.prefix + key));
  }

  async setFlag(key: string, ttlMs: number): Promise<void> {
    if (ttlMs <= 0) return;
    await this.calls.call(() => this.redis.set(this.prefix + key, '1', 'PX', Math.ceil(ttlMs)));
  }

  async hasFlag(key: string): Promise<boolean> {
    return (await this.calls.call(() => this.redis.exists(this.prefix + key))) === 1;
  }

  bump(key: string): Promise<number> {
    return this.calls.call(() => this.redis.incr(this.prefix + key));
  }

  async version(key: string): Promise<number> {
    const value = await this.calls.call(() => this.redis.get(this.prefix + key));
    return value === null ? 0 : Number(value);
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
