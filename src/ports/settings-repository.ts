import type { RuntimeSettingValue } from '../domain/settings.js';

/**
 * Runtime settings that administrators have changed, as name → value (an integer, or a word). Settings nobody
 * changed are absent and follow their configured defaults. A version, raised in the transaction of every
 * change, tells any process that reads it whether the values moved since it last loaded them.
 *
 * @example
 *   await settings.save({ max_login_attempts: 3 }, '2024-01-01T00:00:00Z'); // 1
 *   await settings.load(); // { max_login_attempts: 3 }
 *   await settings.version(); // 1
 */
export interface SettingsRepository {
  load(): Promise<Record<string, RuntimeSettingValue>>;
  /** Upserts the given values and raises the version, in one transaction; returns the new version. */
  save(values: Readonly<Record<string, RuntimeSettingValue>>, updatedAt: string): Promise<number>;
  /** The version of the stored values: raised by every `save`, from any process. */
  version(): Promise<number>;
}
