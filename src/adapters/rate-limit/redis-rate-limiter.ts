import type { Redis } from 'ioredis';
import type { RateLimitDecision, RateLimiter, RateLimitPolicy } from '../../ports/rate-limiter.js';
import { DIRECT_CALLS, type RedisCalls } from '../redis/redis-link.js';

/**
 * Both scripts run atomically in Redis and take "now" from the Redis server (`TIME`), so every
 * instance counts against the same clock and the same state: exact across instances. ARGV[3],
 * when given, replaces the server clock (tests). The arithmetic is the memory adapter's.
 * Returns {allowed (0|1), remaining, resetMs, retryAfterMs}.
 */
const NOW = `
local now
if ARGV[3] ~= nil and ARGV[3] ~= '' then
  now = tonumber(ARGV[3])
else
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
end
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local eps = 1e-9
`;

const TOKEN_BUCKET = `${NOW}
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = limit
  at = now
elseif now > at then
  tokens = tokens + (now - at) * limit / window
  at = now
end
if tokens > limit then tokens = limit end
local allowed = 0
if tokens >= 1 - eps then
  tokens = tokens - 1
  allowed = 1
end
local left = math.max(0, tokens)
local reset = math.ceil((limit - left) * window / limit - eps)
local retry = 0
if allowed == 0 then retry = math.max(1, math.ceil((1 - left) * window / limit - eps)) end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', string.format('%.17g', at))
redis.call('PEXPIRE', KEYS[1], reset + 1000)
return {allowed, math.floor(left + eps), reset, retry}
`;

const SLIDING_WINDOW = `${NOW}
local start = math.floor(now / window) * window
local state = redis.call('HMGET', KEYS[1], 'start', 'previous', 'current')
local known = tonumber(state[1])
local previous = tonumber(state[2]) or 0
local current = tonumber(state[3]) or 0
if known == nil then
  previous = 0
  current = 0
elseif known ~= start then
  if start - known == window then previous = current else previous = 0 end
  current = 0
end
local elapsed = now - start
local used = previous * (window - elapsed) / window + current
local allowed = 0
if used + 1 <= limit + eps then
  allowed = 1
  current = current + 1
  used = used + 1
end
local retry = 0
if allowed == 0 then
  if current + 1 <= limit then
    retry = window - window * (limit - 1 - current) / previous - elapsed
  else
    retry = window - elapsed + window * (1 - (limit - 1) / current)
  end
  retry = math.max(1, math.ceil(retry - eps))
end
local reset = 0
if current > 0 then reset = 2 * window - elapsed elseif previous > 0 then reset = window - elapsed end
redis.call('HSET', KEYS[1], 'start', string.format('%.17g', start), 'previous', previous, 'current', current)
redis.call('PEXPIRE', KEYS[1], 2 * window + 1000)
return {allowed, math.max(0, math.floor(limit - used + eps)), math.ceil(reset), retry}
`;

type ScriptReply = [number, number, number, number];

interface RateLimitCommands {
  urlshortenerTokenBucket(key: string, limit: number, windowMs: number, now: string): Promise<ScriptReply>;
  urlshortenerSlidingWindow(key: string, limit: number, windowMs: number, now: string): Promise<ScriptReply>;
}

export interface RedisRateLimiterOptions {
  /** Prepended to every key (tests give each run its own). */
  readonly keyPrefix?: string;
  /** Replaces the Redis server's clock, in milliseconds (tests only). */
  readonly now?: () => number;
  /** How commands run: a RedisLink gives them deadlines and fails fast while Redis is away. */
  readonly calls?: RedisCalls;
}

/**
 * The distributed rate limiter: one atomic Lua script per decision, so any number of instances
 * sharing the Redis admit exactly the limit between them. Owns the connection it is given.
 */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis & RateLimitCommands;
  private readonly prefix: string;
  private readonly now: (() => number) | undefined;
  private readonly calls: RedisCalls;

  constructor(redis: Redis, options: RedisRateLimiterOptions = {}) {
    redis.defineCommand('urlshortenerTokenBucket', { numberOfKeys: 1, lua: TOKEN_BUCKET });
    redis.defineCommand('urlshortenerSlidingWindow', { numberOfKeys: 1, lua: SLIDING_WINDOW });
    this.redis = redis as Redis & RateLimitCommands;
    this.prefix = `${options.keyPrefix ?? 'urlshortener:'}ratelimit:`;
    this.now = options.now;
    this.calls = options.calls ?? DIRECT_CALLS;
  }

  async consume(key: string, policy: RateLimitPolicy): Promise<RateLimitDecision> {
    const { limit, windowMs } = policy;
    const now = this.now === undefined ? '' : String(this.now());
    const reply = await this.calls.call(() =>
      policy.algorithm === 'sliding_window'
        ? this.redis.urlshortenerSlidingWindow(`${this.prefix}sw:${policy.name}:${key}`, limit, windowMs, now)
        : this.redis.urlshortenerTokenBucket(`${this.prefix}tb:${policy.name}:${key}`, limit, windowMs, now),
    );
    const [allowed, remaining, resetMs, retryAfterMs] = reply;
    return { allowed: allowed === 1, limit, remaining, resetMs, retryAfterMs };
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
