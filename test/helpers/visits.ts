import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { DatabaseSchema } from '../../src/adapters/storage/schema.js';
import { DAY_MS, HOUR_MS } from '../../src/domain/visit.js';
import { decodeVisitDay, estimateVisitors } from '../../src/domain/visit-day.js';

export const CHROME_WINDOWS =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';
export const SAFARI_IPHONE =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1';
export const SAFARI_IPAD =
  'Mozilla/5.0 (iPad; CPU OS 16_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.0 Mobile/15E148 Safari/604.1';
export const GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)';
export const USER_AGENTS = [CHROME_WINDOWS, SAFARI_IPHONE, SAFARI_IPAD, GOOGLEBOT, 'curl/8.5.0', undefined];
export const REFERRERS = ['https://news.example.com/a?b=c', 'http://blog.example.org/', undefined, 'not a url'];

/** Every table visits are written to: their rows as text (to look for what must never be stored). */
export async function visitTablesText(db: Kysely<DatabaseSchema>): Promise<string> {
  const tables = ['visits', 'visit_days', 'visit_batches'] as const;
  const dumps: unknown[] = [];
  for (const table of tables) dumps.push(await db.selectFrom(table).selectAll().execute());
  return JSON.stringify(dumps);
}

type DayCounts = { hours: number[]; bots: number[]; values: Record<string, Record<string, number>> };

/**
 * The day rows recounted from the raw visits of `urlId` (visits and bots per hour, visits per
 * dimension value), and as stored: they must be equal. `visitors`: the distinct visitors the
 * stored sketches estimate, added up over the days (to hold against the test's own count).
 * Read straight from the tables.
 */
export async function rollupsAndRecount(db: Kysely<DatabaseSchema>, urlId: number) {
  const visits = await db.selectFrom('visits').selectAll().where('url_id', '=', urlId).execute();
  const recount = new Map<number, DayCounts>();
  for (const v of visits) {
    const day = Math.floor(v.visited_at_ms / DAY_MS);
    let counts = recount.get(day);
    if (counts === undefined) {
      counts = { hours: new Array<number>(24).fill(0), bots: new Array<number>(24).fill(0), values: {} };
      recount.set(day, counts);
    }
    const hour = Math.floor(v.visited_at_ms / HOUR_MS) % 24;
    counts.hours[hour]!++;
    counts.bots[hour]! += Number(v.bot);
    for (const [dimension, value] of [
      ['referrer', v.referrer_host],
      ['country', v.country],
      ['browser', v.browser],
      ['os', v.os],
      ['device', v.device],
    ] as const) {
      const values = (counts.values[dimension] ??= {});
      values[value ?? ''] = (values[value ?? ''] ?? 0) + 1;
    }
  }
  const rows = await db.selectFrom('visit_days').selectAll().where('url_id', '=', urlId).execute();
  const stored = new Map<number, DayCounts>();
  let visitors = 0;
  for (const row of rows) {
    const { hours, bots, values, sketch } = decodeVisitDay(row.data);
    stored.set(Number(row.day), { hours, bots, values: values as DayCounts['values'] });
    visitors += estimateVisitors(sketch);
  }
  const sorted = (map: Map<number, DayCounts>) => [...map].sort(([a], [b]) => a - b);
  return { count: visits.length, recount: sorted(recount), stored: sorted(stored), visitors };
}

/** Visit rows of a mapping, by code. */
export async function visitRows(db: Kysely<DatabaseSchema>, code: string) {
  return db
    .selectFrom('visits')
    .selectAll()
    .where('url_id', '=', sql<number>`(SELECT id FROM url_mappings WHERE code = ${code})`)
    .orderBy('id')
    .execute();
}
