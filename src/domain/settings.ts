/**
 * Runtime settings: integers that administrators change while the service runs
 * (`GET`/`PATCH /api/v1/admin/settings`). Each is declared once with its bounds; other concerns
 * (rate limits, …) add their own definitions beside these.
 */
export interface RuntimeSettingDefinition {
  readonly name: string;
  readonly minimum: number;
  readonly maximum: number;
  readonly description: string;
}

/** The values in force, by name. */
export type RuntimeSettingValues = Readonly<Record<string, number>>;

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
