/**
 * Where "now" comes from. Time-based rules (token expiry, lockout windows) read it, so tests can
 * move time forward instead of sleeping.
 *
 * @example
 *   const expiresAt = clock.now() + ttlMs;
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
