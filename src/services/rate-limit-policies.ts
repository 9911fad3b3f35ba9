import { RATE_LIMIT_GROUPS, type RateLimitConfig, type RateLimitGroup } from '../config/config.js';
import { RATE_LIMIT_LIMIT_BOUNDS, RATE_LIMIT_WINDOW_BOUNDS } from '../domain/settings.js';
import type { RateLimitPolicy } from '../ports/rate-limiter.js';

/** A rate-limit value administrators may change at runtime, with its bounds. */
export interface RateLimitSetting {
  /** `rate_limit_<group>_limit` or `rate_limit_<group>_window_seconds`. */
  readonly name: string;
  readonly group: RateLimitGroup;
  readonly field: 'limit' | 'windowSeconds';
  readonly min: number;
  readonly max: number;
}

/**
 * Every runtime setting of the rate limits, e.g. `rate_limit_writes_limit`, with the bounds of
 * their definitions (domain/settings.ts, which GET/PATCH /api/v1/admin/settings serve).
 */
export const RATE_LIMIT_SETTINGS: readonly RateLimitSetting[] = RATE_LIMIT_GROUPS.flatMap((group) => [
  {
    name: `rate_limit_${group}_limit`,
    group,
    field: 'limit' as const,
    min: RATE_LIMIT_LIMIT_BOUNDS.minimum,
    max: RATE_LIMIT_LIMIT_BOUNDS.maximum,
  },
  {
    name: `rate_limit_${group}_window_seconds`,
    group,
    field: 'windowSeconds' as const,
    min: RATE_LIMIT_WINDOW_BOUNDS.minimum,
    max: RATE_LIMIT_WINDOW_BOUNDS.maximum,
  },
]);

/**
 * The policy in force for each route group. Starts from the configuration (env); the admin
 * settings service calls `apply()` with the stored settings whenever they change, and the rate
 * limiter reads `get()` on every request, so a change takes effect on the next request.
 *
 * @example
 *   policies.apply({ rate_limit_writes_limit: 120 }); // writes: 120 per window from now on
 *   policies.apply({});                               // back to the configured values
 */
export class RateLimitPolicies {
  private current: Record<RateLimitGroup, RateLimitPolicy>;

  constructor(private readonly config: RateLimitConfig) {
    this.current = this.build({});
  }

  /** The policy of `group` now. */
  get(group: RateLimitGroup): RateLimitPolicy {
    return this.current[group];
  }

  /**
   * Uses the given runtime settings (names as in `RATE_LIMIT_SETTINGS`; others are ignored) over
   * the configured values. A setting that is absent, or outside its bounds, follows the configuration.
   */
  apply(settings: Readonly<Record<string, number | string>>): void {
    this.current = this.build(settings);
  }

  /** The configured values (env), by runtime setting name: the runtime settings' defaults. */
  static defaults(config: RateLimitConfig): Record<string, number> {
    return Object.fromEntries(RATE_LIMIT_SETTINGS.map((s) => [s.name, config.policies[s.group][s.field]]));
  }

  /**
   * Follows `settings` from now on: applies the values in force, then every change (on this
   * instance at once, on the others when their poll sees it).
   */
  follow(settings: {
    current(): Readonly<Record<string, number | string>>;
    onChange(listener: (values: Readonly<Record<string, number | string>>) => void): void;
  }): void {
    this.apply(settings.current());
    settings.onChange((values) => this.apply(values));
  }

  /** The values in force, by runtime setting name. */
  settings(): Record<string, number> {
    return Object.fromEntries(
      RATE_LIMIT_SETTINGS.map((s) => {
        const policy = this.current[s.group];
        return [s.name, s.field === 'limit' ? policy.limit : policy.windowMs / 1000];
      }),
    );
  }

  private build(settings: Readonly<Record<string, number | string>>): Record<RateLimitGroup, RateLimitPolicy> {
    const value = (group: RateLimitGroup, field: RateLimitSetting['field']): number => {
      const setting = RATE_LIMIT_SETTINGS.find((s) => s.group === group && s.field === field)!;
      const given = settings[setting.name];
      const valid =
        typeof given === 'number' && Number.isInteger(given) && given >= setting.min && given <= setting.max;
      return valid ? given : this.config.policies[group][field];
    };
    const policies = {} as Record<RateLimitGroup, RateLimitPolicy>;
    for (const group of RATE_LIMIT_GROUPS) {
      const limit = value(group, 'limit');
      const windowMs = value(group, 'windowSeconds') * 1000;
      const previous = this.current?.[group];
      // Unchanged policies keep their identity, so per-policy caches stay warm.
      policies[group] =
        previous !== undefined && previous.limit === limit && previous.windowMs === windowMs
          ? previous
          : Object.freeze({ name: group, limit, windowMs, algorithm: this.config.algorithm });
    }
    return policies;
  }
}
