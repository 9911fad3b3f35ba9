/** A counter's value and how long until it expires. */
export interface CounterState {
  readonly count: number;
  /** Milliseconds until the counter expires (and reads as absent). */
  readonly ttlMs: number;
}

/**
 * Small shared state with expiry: counters with a sliding window, flags that expire, and versions
 * that announce changes. In-process memory by default; Redis (atomic, shared by every instance)
 * when configured. Every adapter passes `test/contract/counters.contract.test.ts`.
 *
 * @example
 *   const failures = await counters.increment('login-failures:alice', 15 * 60_000); // 1, 2, 3, …
 *   await counters.setFlag('revoked:' + jti, msUntilExpiry);
 *   if (await counters.hasFlag('revoked:' + jti)) reject();
 *   await counters.bump('settings'); // other instances see version('settings') change
 */
export interface Counters {
  /**
   * Adds 1 to `key` and returns the new count. Every hit resets the expiry to `ttlMs` from now
   * (a sliding window): the counter disappears only after `ttlMs` without a hit.
   */
  increment(key: string, ttlMs: number): Promise<number>;
  /** The counter's value and remaining time, or undefined when absent or expired. */
  get(key: string): Promise<CounterState | undefined>;
  /** Removes a counter (or a flag). */
  delete(key: string): Promise<void>;
  /** Sets a flag that expires after `ttlMs`; a non-positive `ttlMs` sets nothing. */
  setFlag(key: string, ttlMs: number): Promise<void>;
  hasFlag(key: string): Promise<boolean>;
  /** Announces a change: increments the version of `key`, which never expires, and returns it. */
  bump(key: string): Promise<number>;
  /** The current version of `key`; 0 when it was never bumped. Poll it to notice changes. */
  version(key: string): Promise<number>;
  close(): Promise<void>;
}
