import type { Counters } from '../ports/counters.js';

export interface LoginThrottleOptions {
  /** Failed logins an address may make within `windowMs`; 0: no limit. */
  readonly maxFailures: number;
  readonly windowMs: number;
}

/** What the throttle does when its counters cannot be reached (Redis away): it admits. */
export type ThrottleFailureReporter = (error: unknown) => void;

/**
 * Failed logins per client address, over every username: what the per-username lockout (spec
 * §5.5) cannot see, one address trying many usernames (or locking many accounts). Beyond
 * `maxFailures` within `windowMs` (sliding: each failure restarts it), that address's logins are
 * refused until the window has passed since its last failure. Refused attempts are not counted
 * (they do not extend the wait), and a success does not reset the count: an attacker could
 * otherwise clear it by signing in to an account of their own between guesses.
 *
 * On the shared `Counters` (Redis across instances, else this process's memory). While they
 * cannot be reached it admits, as the rate limits do: the per-username lockout, kept in the
 * database, still holds.
 *
 * @example
 *   const wait = await throttle.refusal(request.ip); // seconds to wait, or undefined
 *   if (wait !== undefined) throw errors.loginThrottled(wait);
 */
export class LoginThrottle {
  constructor(
    private readonly counters: Counters,
    private readonly options: LoginThrottleOptions,
    private readonly onUnavailable: ThrottleFailureReporter = () => undefined,
  ) {}

  get enabled(): boolean {
    return this.options.maxFailures > 0;
  }

  /** Seconds `address` must wait before its next login attempt, or undefined when it may try. */
  async refusal(address: string): Promise<number | undefined> {
    if (!this.enabled) return undefined;
    try {
      const state = await this.counters.get(key(address));
      if (state === undefined || state.count < this.options.maxFailures) return undefined;
      return Math.max(1, Math.ceil(state.ttlMs / 1000));
    } catch (error) {
      this.onUnavailable(error);
      return undefined;
    }
  }

  async recordFailure(address: string): Promise<void> {
    if (!this.enabled) return;
    try {
      await this.counters.increment(key(address), this.options.windowMs);
    } catch (error) {
      this.onUnavailable(error);
    }
  }
}

function key(address: string): string {
  return `login-address-failures:${address}`;
}
