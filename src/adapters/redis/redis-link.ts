import type { Redis } from 'ioredis';
import { BackendUnavailableError } from '../../domain/errors.js';
import { connectRedis } from './connect-redis.js';

/** How an adapter runs its Redis commands: through a RedisLink, or straight (tests, tools). */
export interface RedisCalls {
  call<T>(operation: () => Promise<T>): Promise<T>;
}

export const DIRECT_CALLS: RedisCalls = { call: (operation) => operation() };

export interface RedisLinkLogger {
  info(object: unknown, message: string): void;
  warn(object: unknown, message: string): void;
}

export interface RedisLinkOptions {
  readonly url: string;
  /** REDIS_TIMEOUT_MS: deadline of every command. */
  readonly timeoutMs: number;
  readonly logger: RedisLinkLogger;
  /** While Redis is away, how often it is pinged in the background to notice that it is back. */
  readonly probeIntervalMs?: number;
}

/** Redis replies that mean "not now" rather than "wrong command". */
const UNAVAILABLE_REPLY = /^(LOADING|BUSY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|READONLY)\b/;

/** Whether a failed command says Redis is away (connection, deadline) rather than the command is wrong. */
export function isRedisAvailabilityError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error.name !== 'ReplyError') return true;
  return UNAVAILABLE_REPLY.test(error.message);
}

/**
 * This process's connections to one Redis and what they share. Every command has a deadline;
 * once one fails for want of Redis (or a connection drops), Redis counts as away: calls fail at
 * once with BackendUnavailableError('redis') until every connection is ready and a background
 * ping succeeds again. The log says once that Redis is away and once that it is back;
 * `onBack` listeners rebuild what Redis may have lost.
 *
 * @example
 *   const link = new RedisLink({ url, timeoutMs: 500, logger });
 *   const redis = link.connect('counters');
 *   const value = await link.call(() => redis.get('key')); // fails fast while Redis is away
 */
export class RedisLink implements RedisCalls {
  private readonly clients: Redis[] = [];
  private readonly backListeners: Array<() => void> = [];
  private readonly probeIntervalMs: number;
  private away = false;
  private closed = false;
  private probe: NodeJS.Timeout | undefined;
  private probing = false;

  constructor(private readonly options: RedisLinkOptions) {
    this.probeIntervalMs = options.probeIntervalMs ?? 1000;
  }

  /** A new connection, watched by this link; its owner closes it (or `close()` does). */
  connect(name: string): Redis {
    const client = connectRedis(this.options.url, name, { timeoutMs: this.options.timeoutMs });
    client.on('error', (error: Error) => this.lost(error));
    client.on('reconnecting', () => this.lost(new Error(`connection ${name} closed; reconnecting`)));
    client.on('ready', () => this.regained());
    // No 'end' listener: a connection ends only when closed on purpose (retryStrategy never gives up).
    this.clients.push(client);
    return client;
  }

  /** Whether Redis answered the last time it was asked. */
  get available(): boolean {
    return !this.away;
  }

  async call<T>(operation: () => Promise<T>): Promise<T> {
    if (this.away) throw new BackendUnavailableError('redis');
    try {
      const result = await operation();
      this.regained();
      return result;
    } catch (error) {
      if (!isRedisAvailabilityError(error)) throw error;
      this.lost(error as Error);
      throw new BackendUnavailableError('redis', { cause: error });
    }
  }

  /** Readiness: every connection answers PING within the deadline (also while counted away). */
  async ping(): Promise<void> {
    try {
      await Promise.all(this.clients.map((client) => client.ping()));
    } catch (error) {
      if (isRedisAvailabilityError(error)) this.lost(error as Error);
      throw new BackendUnavailableError('redis', { cause: error });
    }
    this.regained();
  }

  /** Calls `listener` each time Redis is back after being away (it may have restarted empty). */
  onBack(listener: () => void): void {
    this.backListeners.push(listener);
  }

  /** Closes every connection still open; no more "away" lines after this. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.probe);
    await Promise.all(
      this.clients.map((client) =>
        client.status === 'end' ? undefined : client.quit().catch(() => client.disconnect()),
      ),
    );
  }

  private allReady(): boolean {
    return this.clients.every((client) => client.status === 'ready');
  }

  private lost(error: Error): void {
    if (this.closed || this.away) return;
    this.away = true;
    this.options.logger.warn(
      { err: error.message },
      'Redis is away (check REDIS_URL if it lasts): rate limits admit requests; sessions and lockouts are read from the database',
    );
    // No request waits on a probe: a paused Redis is noticed back by these pings (a restarted
    // one also by its connections becoming ready).
    this.probe = setInterval(() => void this.probeOnce(), this.probeIntervalMs);
    this.probe.unref();
  }

  private async probeOnce(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    await this.ping().catch(() => undefined);
    this.probing = false;
  }

  private regained(): void {
    if (!this.away || this.closed || !this.allReady()) return;
    this.away = false;
    clearInterval(this.probe);
    this.probe = undefined;
    this.options.logger.info({}, 'Redis is back');
    for (const listener of this.backListeners) listener();
  }
}
