import type { RateLimitDecision, RateLimiter, RateLimitPolicy } from '../../ports/rate-limiter.js';

/** Absorbs floating-point dust so that a token refilled "exactly now" counts. */
const EPSILON = 1e-9;

/** Token bucket: `tokens` left at time `at`; refills `limit` tokens per window, evenly. */
interface Bucket {
  tokens: number;
  at: number;
}

/** Sliding window: requests counted in the fixed window starting at `start` and in the one before. */
interface Window {
  start: number;
  previous: number;
  current: number;
}

interface Store<S> {
  policy: RateLimitPolicy;
  readonly entries: Map<string, S>;
}

export interface MemoryRateLimiterOptions {
  /** Milliseconds from a monotonic clock; tests move it by hand. */
  readonly now?: () => number;
  /** How often idle clients are forgotten. */
  readonly sweepIntervalMs?: number;
  /** Clients remembered at most; beyond it idle ones are swept at once, then the oldest dropped. */
  readonly maxKeys?: number;
}

/**
 * The embedded rate limiter: exact for one process, O(1) per request (one map lookup, a few
 * arithmetic operations, no allocation once a client is known). Idle clients are forgotten by a
 * periodic sweep, so memory follows the number of active clients.
 */
export class MemoryRateLimiter implements RateLimiter {
  private readonly now: () => number;
  private readonly maxKeys: number;
  private readonly buckets = new Map<string, Store<Bucket>>();
  private readonly windows = new Map<string, Store<Window>>();
  private readonly storeOf = new WeakMap<RateLimitPolicy, Store<Bucket> | Store<Window>>();
  private readonly sweeper: NodeJS.Timeout | undefined;
  private keys = 0;

  constructor(options: MemoryRateLimiterOptions = {}) {
    this.now = options.now ?? (() => performance.now());
    this.maxKeys = options.maxKeys ?? 1_000_000;
    const interval = options.sweepIntervalMs ?? 60_000;
    if (interval > 0) {
      this.sweeper = setInterval(() => this.sweep(), interval);
      this.sweeper.unref();
    }
  }

  consume(key: string, policy: RateLimitPolicy): RateLimitDecision {
    const now = this.now();
    return policy.algorithm === 'sliding_window'
      ? this.slide(this.store(this.windows, policy), key, policy, now)
      : this.take(this.store(this.buckets, policy), key, policy, now);
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    this.buckets.clear();
    this.windows.clear();
    this.keys = 0;
  }

  private take(store: Store<Bucket>, key: string, policy: RateLimitPolicy, now: number): RateLimitDecision {
    const { limit, windowMs } = policy;
    let bucket = store.entries.get(key);
    if (bucket === undefined) {
      bucket = { tokens: limit, at: now };
      this.remember(store, key, bucket);
    } else {
      const elapsed = now - bucket.at;
      // Multiply before dividing: whole refills come out exact.
      bucket.tokens = Math.min(limit, elapsed > 0 ? bucket.tokens + (elapsed * limit) / windowMs : bucket.tokens);
      if (elapsed > 0) bucket.at = now;
    }
    const allowed = bucket.tokens >= 1 - EPSILON;
    if (allowed) bucket.tokens -= 1;
    const tokens = Math.max(0, bucket.tokens);
    return {
      allowed,
      limit,
      remaining: Math.floor(tokens + EPSILON),
      resetMs: Math.ceil(((limit - tokens) * windowMs) / limit - EPSILON),
      retryAfterMs: allowed ? 0 : Math.max(1, Math.ceil(((1 - tokens) * windowMs) / limit - EPSILON)),
    };
  }

  private slide(store: Store<Window>, key: string, policy: RateLimitPolicy, now: number): RateLimitDecision {
    const { limit, windowMs } = policy;
    const start = Math.floor(now / windowMs) * windowMs;
    let window = store.entries.get(key);
    if (window === undefined) {
      window = { start, previous: 0, current: 0 };
      this.remember(store, key, window);
    } else if (window.start !== start) {
      window.previous = start - window.start === windowMs ? window.current : 0;
      window.current = 0;
      window.start = start;
    }
    return slidingDecision(window, limit, windowMs, now - start);
  }

  private store<S extends Bucket | Window>(stores: Map<string, Store<S>>, policy: RateLimitPolicy): Store<S> {
    const known = this.storeOf.get(policy) as Store<S> | undefined;
    if (known !== undefined) return known;
    // A new policy object (its limit changed at runtime): keep counting where the old one was.
    const name = policy.name;
    let store = stores.get(name);
    if (store === undefined) {
      store = { policy, entries: new Map() };
      stores.set(name, store);
    }
    store.policy = policy;
    this.storeOf.set(policy, store as Store<Bucket> | Store<Window>);
    return store;
  }

  private remember<S>(store: Store<S>, key: string, state: S): void {
    store.entries.set(key, state);
    if (++this.keys > this.maxKeys) this.shed(store);
  }

  /** Forgets every client whose quota is whole again: remembering it would change nothing. */
  sweep(): void {
    const now = this.now();
    for (const { policy, entries } of this.buckets.values()) {
      for (const [key, bucket] of entries) {
        if (bucket.tokens + ((now - bucket.at) * policy.limit) / policy.windowMs >= policy.limit)
          this.forget(entries, key);
      }
    }
    for (const { policy, entries } of this.windows.values()) {
      for (const [key, window] of entries) {
        if (now - window.start >= 2 * policy.windowMs) this.forget(entries, key);
      }
    }
  }

  private forget<S>(entries: Map<string, S>, key: string): void {
    if (entries.delete(key)) this.keys--;
  }

  private shed<S>(store: Store<S>): void {
    this.sweep();
    // Still too many active clients: drop the longest-known ones of this policy.
    for (const key of store.entries.keys()) {
      if (this.keys <= this.maxKeys) break;
      this.forget(store.entries, key);
    }
  }
}

/**
 * The sliding-window decision (the Redis adapter's script does the same arithmetic): the previous
 * window counts in proportion to how much of it still lies within the last `windowMs`. Counts
 * this request into `window.current` when admitted.
 */
function slidingDecision(
  window: { previous: number; current: number },
  limit: number,
  windowMs: number,
  elapsed: number,
): RateLimitDecision {
  const weight = (windowMs - elapsed) / windowMs;
  const used = window.previous * weight + window.current;
  const allowed = used + 1 <= limit + EPSILON;
  if (allowed) window.current++;
  const nowUsed = allowed ? used + 1 : used;
  let retryAfterMs = 0;
  if (!allowed) {
    retryAfterMs =
      window.current + 1 <= limit
        ? // within this window, once enough of the previous one has slid out
          windowMs - (windowMs * (limit - 1 - window.current)) / window.previous - elapsed
        : // in the next window, once enough of this one has slid out
          windowMs - elapsed + windowMs * (1 - (limit - 1) / window.current);
    retryAfterMs = Math.max(1, Math.ceil(retryAfterMs - EPSILON));
  }
  return {
    allowed,
    limit,
    remaining: Math.max(0, Math.floor(limit - nowUsed + EPSILON)),
    resetMs: Math.ceil(window.current > 0 ? 2 * windowMs - elapsed : window.previous > 0 ? windowMs - elapsed : 0),
    retryAfterMs,
  };
}
