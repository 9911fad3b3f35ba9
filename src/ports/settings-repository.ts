import type { RuntimeSettingValue } from '../domain/settings.js';

/**
 * Runtime settings that administrators have changed, as name → value (an integer, or a word). Settings nobody
 * changed are absent and follow their configured defaults.
 *
 * @example
 *   await settings.save({ max_login_attempts: 3 }, '2024-01-01T00:00:00Z');
 *   await settings.load(); // { max_login_attempts: 3 }
 */
export interface SettingsRepository {
  load(): Promise<Record<string, RuntimeSettingValue>>;
  /** Upserts the given values in one transaction. */
  save(values: Readonly<Record<string, RuntimeSettingValue>>, updatedAt: string): Promise<void>;
}
