export type RateLimitAlgorithm = 'token_bucket' | 'sliding_window';

/** What one client may do on one group of routes. */
export interface RateLimitPolicy {
  /** The policy's name, shown in the `RateLimit` headers and metrics: `writes`, `redirects`, … */
  readonly name: string;
  /** Requests admitted per window. */
  readonly limit: number;
  readonly windowMs: number;
  readonly algorithm: RateLimitAlgorithm;
}

/** The outcome of one request against a policy. */
export interface RateLimitDecision {
  readonly allowed: boolean;
  readonly limit: number;
  /** Requests still admitted right now, after this one. */
  readonly remaining: number;
  /** Milliseconds until the full quota is available again. */
  readonly resetMs: number;
  /** When refused: milliseconds until a request would be admitted; 0 when allowed. */
  readonly retryAfterMs: number;
}

/**
 * Counts requests per client key and decides whether one more is admitted. In-process memory by
 * default; Redis (atomic, exact across instances) when configured. Every adapter passes
 * `test/contract/rate-limiter.contract.test.ts`. The memory adapter answers synchronously, so the
 * redirect path never waits on a promise for it.
 *
 * @example
 *   const decision = await limiter.consume('ip:203.0.113.7', { name: 'writes', limit: 60, windowMs: 60_000, algorithm: 'token_bucket' });
 *   if (!decision.allowed) reply.code(429).header('retry-after', Math.ceil(decision.retryAfterMs / 1000));
 */
export interface RateLimiter {
  /** Counts one request of `key` against `policy` (when admitted) and returns the decision. */
  consume(key: string, policy: RateLimitPolicy): RateLimitDecision | Promise<RateLimitDecision>;
  /** Resolves when the backing store answers (readiness). */
  ping(): Promise<void>;
  close(): Promise<void>;
}
