import type { Kysely } from 'kysely';
import type { RuntimeSettingValue } from '../../domain/settings.js';
import type { SettingsRepository } from '../../ports/settings-repository.js';
import type { DatabaseSchema } from './schema.js';

/** Administrator-changed runtime settings, one row per setting, values as JSON text. */
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

  async save(values: Readonly<Record<string, RuntimeSettingValue>>, updatedAt: string): Promise<void> {
    const entries = Object.entries(values);
    if (entries.length === 0) return;
    await this.db.transaction().execute(async (trx) => {
      for (const [key, value] of entries) {
        await trx
          .insertInto('settings')
          .values({ key, value: JSON.stringify(value), updated_at: updatedAt })
          .onConflict((oc) => oc.column('key').doUpdateSet({ value: JSON.stringify(value), updated_at: updatedAt }))
          .execute();
      }
    });
  }
}
