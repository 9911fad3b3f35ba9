import type { Kysely } from 'kysely';
import type { RuntimeSettingValue } from '../../domain/settings.js';
import type { SettingsRepository } from '../../ports/settings-repository.js';
import type { DatabaseSchema } from './schema.js';

/** Administrator-changed runtime settings, one row per setting, values as JSON text; their version in `settings_version`. */
export class KyselySettingsRepository implements SettingsRepository {
  constructor(private readonly db: Kysely<DatabaseSchema>) {}

  async load(): Promise<Record<string, RuntimeSettingValue>> {
    const rows = await this.db.selectFrom('settings').select(['key', 'value']).execute();
    const values: Record<string, RuntimeSettingValue> = {};
    for (const row of rows) {
      const value: unknown = JSON.parse(row.value);
      if ((typeof value === 'number' && Number.isFinite(value)) || typeof value === 'string') values[row.key] = value;
    }
    return values;
  }

  /**
   * The changes and the version's step in one transaction, which takes the version's row first:
   * changes made at once (through any instance) wait for one another there, whole, so none sees
   * a settings row another holds. Taken after the settings' rows, as before, two changes naming
   * the same settings in a different order (`{a, b}` and `{b, a}`) each held a row the other
   * wanted: PostgreSQL ended one as a deadlock, a 500, after a second's wait.
   */
  async save(values: Readonly<Record<string, RuntimeSettingValue>>, updatedAt: string): Promise<number> {
    const entries = Object.entries(values);
    if (entries.length === 0) return this.version();
    return this.db.transaction().execute(async (trx) => {
      const { version } = await trx
        .updateTable('settings_version')
        .set((eb) => ({ version: eb('version', '+', 1) }))
        .returning('version')
        .executeTakeFirstOrThrow();
      for (const [key, value] of entries) {
        await trx
          .insertInto('settings')
          .values({ key, value: JSON.stringify(value), updated_at: updatedAt })
          .onConflict((oc) => oc.column('key').doUpdateSet({ value: JSON.stringify(value), updated_at: updatedAt }))
          .execute();
      }
      return version;
    });
  }

  async version(): Promise<number> {
    const { version } = await this.db.selectFrom('settings_version').select('version').executeTakeFirstOrThrow();
    return version;
  }
}
