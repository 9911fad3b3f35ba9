import type { Kysely } from 'kysely';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import type { AnyKysely } from '../../src/adapters/storage/database.js';

/** The event ids of the `url.created` events (or `eventType`'s) in `event_store`, per short code. */
export async function storedCreatedByCode(
  database: AnyKysely,
  eventType = 'url.created',
): Promise<Map<string, string[]>> {
  const rows = await (database as Kysely<EventTables>)
    .selectFrom('event_store')
    .select(['event_id', 'payload'])
    .where('event_type', '=', eventType)
    .execute();
  const byCode = new Map<string, string[]>();
  for (const row of rows) {
    const code = (JSON.parse(row.payload) as { code: string }).code;
    byCode.set(code, [...(byCode.get(code) ?? []), row.event_id]);
  }
  return byCode;
}
