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

  async save(values: Readonly<Record<string, RuntimeSettingValue>>, updatedAt: string): Promise<number> {
    const entries = Object.entries(values);
    if (entries.length === 0) return this.version();
    return this.db.transaction().execute(async (trx) => {
      for (const [key, value] of entries) {
        await trx
          .insertInto('settings')
          .values({ key, value: JSON.stringify(value), updated_at: updatedAt })
          .onConflict((oc) => oc.column('key').doUpdateSet({ value: JSON.stringify(value), updated_at: updatedAt }))
          .execute();
      }
      const { version } = await trx
        .updateTable('settings_version')
        .set((eb) => ({ version: eb('version', '+', 1) }))
        .returning('version')
        .executeTakeFirstOrThrow();
      return version;
    });
  }

  async version(): Promise<number> {
    const { version } = await this.db.selectFrom('settings_version').select('version').executeTakeFirstOrThrow();
    return version;
  }
}
