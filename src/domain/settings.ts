/**
 * Runtime settings: integers (or one of a few words) that administrators change while the
 * service runs (`GET`/`PATCH /api/v1/admin/settings`). Each is declared once with its bounds or
 * its choices; other concerns (rate limits, links, …) add their own definitions beside these.
 */
export interface IntegerSettingDefinition {
  readonly name: string;
  readonly minimum: number;
  readonly maximum: number;
  readonly description: string;
  readonly choices?: undefined;
}

/** A setting whose value is one of `choices` (a word, such as a policy's name). */
export interface ChoiceSettingDefinition {
  readonly name: string;
  readonly choices: readonly string[];
  readonly description: string;
}

export type RuntimeSettingDefinition = IntegerSettingDefinition | ChoiceSettingDefinition;

export type RuntimeSettingValue = number | string;

/** The values in force, by name. */
export type RuntimeSettingValues = Readonly<Record<string, RuntimeSettingValue>>;

/** The account settings of spec §5.5 and §5.6. */
export interface AuthSettingValues {
  readonly password_min_length: number;
  readonly max_login_attempts: number;
  readonly lockout_duration_minutes: number;
}

export const AUTH_SETTINGS = {
  password_min_length: {
    name: 'password_min_length',
    // 8 is the create-user schema's minimum (spec §5.6); 72 is the most bcrypt can use.
    minimum: 8,
    maximum: 72,
    description: 'Shortest password accepted at registration, in characters.',
  },
  max_login_attempts: {
    name: 'max_login_attempts',
    minimum: 1,
    maximum: 100,
    description: 'Failed logins per username before the lockout.',
  },
  lockout_duration_minutes: {
    name: 'lockout_duration_minutes',
    minimum: 1,
    maximum: 1440,
    description:
      'How long a lockout lasts after the last failed attempt, in minutes (also the window that counts failures).',
  },
} as const satisfies Record<keyof AuthSettingValues, RuntimeSettingDefinition>;

/** Why `value` is not acceptable for `definition`, or undefined when it is. */
export function settingProblem(definition: RuntimeSettingDefinition, value: unknown): string | undefined {
  if (definition.choices !== undefined) {
    return typeof value === 'string' && definition.choices.includes(value)
      ? undefined
      : `'${definition.name}' must be one of ${definition.choices.join(', ')}`;
  }
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < definition.minimum ||
    value > definition.maximum
  ) {
    return `'${definition.name}' must be an integer from ${definition.minimum} to ${definition.maximum}`;
  }
  return undefined;
}

/** The route groups whose rate-limit policy administrators may change (design "Rate limiting"). */
export const RATE_LIMIT_SETTING_GROUPS = ['auth', 'writes', 'redirects', 'default'] as const;

/** `rate_limit_<group>_limit`: the same bounds as `RATE_LIMIT_<GROUP>_LIMIT`. */
export const RATE_LIMIT_LIMIT_BOUNDS = { minimum: 1, maximum: 1_000_000_000 } as const;
/** `rate_limit_<group>_window_seconds`: the same bounds as `RATE_LIMIT_<GROUP>_WINDOW_S` (1 s to 1 day). */
export const RATE_LIMIT_WINDOW_BOUNDS = { minimum: 1, maximum: 86_400 } as const;

/**
 * The rate-limit runtime settings: per route group, the requests admitted per window and client,
 * and the window. Their defaults are the `RATE_LIMIT_*` variables; a change applies on every
 * instance within the settings' poll interval (RateLimitPolicies follows RuntimeSettings).
 */
export const RATE_LIMIT_SETTINGS: readonly IntegerSettingDefinition[] = RATE_LIMIT_SETTING_GROUPS.flatMap((group) => [
  {
    name: `rate_limit_${group}_limit`,
    ...RATE_LIMIT_LIMIT_BOUNDS,
    description: `Requests admitted per window and client on the \`${group}\` routes.`,
  },
  {
    name: `rate_limit_${group}_window_seconds`,
    ...RATE_LIMIT_WINDOW_BOUNDS,
    description: `Window of the \`${group}\` rate limit, in seconds (the token bucket refills the limit over it).`,
  },
]);

/** Who may create, change and delete links (LINK_WRITE_POLICY; README "Links and their owners"). */
export const LINK_WRITE_POLICIES = ['open', 'owned'] as const;
export type LinkWritePolicy = (typeof LINK_WRITE_POLICIES)[number];

export interface LinkSettingValues {
  readonly link_write_policy: LinkWritePolicy;
}

export const LINK_SETTINGS = {
  link_write_policy: {
    name: 'link_write_policy',
    choices: LINK_WRITE_POLICIES,
    description:
      '`open`: anyone may create links, and change or delete those created anonymously; `owned`: only signed-in users, each on their own links (administrators on all).',
  },
} as const satisfies Record<keyof LinkSettingValues, ChoiceSettingDefinition>;
