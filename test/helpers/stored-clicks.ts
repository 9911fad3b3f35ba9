import type { Kysely } from 'kysely';
import type { DatabaseSchema } from '../../src/adapters/storage/schema.js';

/**
 * A mapping's click count as the database holds it, without any instance's buffered clicks: the
 * count folded into its row plus its deltas not yet folded (`url_click_deltas`). Read straight
 * from the tables, not through the repository under test.
 */
export async function storedClicks(
  db: Kysely<DatabaseSchema>,
  by: { readonly id: number } | { readonly code: string },
): Promise<number> {
  const row = await db
    .selectFrom('url_mappings')
    .select(['id', 'click_count'])
    .where((eb) => ('id' in by ? eb('id', '=', by.id) : eb('code', '=', by.code)))
    .executeTakeFirstOrThrow();
  const deltas = await db.selectFrom('url_click_deltas').select('delta').where('url_id', '=', row.id).execute();
  return deltas.reduce((sum, d) => sum + Number(d.delta), Number(row.click_count));
}
