import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { DatabaseSchema } from '../../src/adapters/storage/schema.js';
import { DAY_MS, HOUR_MS } from '../../src/domain/visit.js';

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
  const tables = ['visits', 'visit_hourly', 'visit_daily', 'visit_uniques', 'visit_visitors', 'visit_batches'] as const;
  const dumps: unknown[] = [];
  for (const table of tables) dumps.push(await db.selectFrom(table).selectAll().execute());
  return JSON.stringify(dumps);
}

/**
 * The rollups recounted from the raw visits of `urlId`, and as stored: they must be equal.
 * Read straight from the tables.
 */
export async function rollupsAndRecount(db: Kysely<DatabaseSchema>, urlId: number) {
  const visits = await db.selectFrom('visits').selectAll().where('url_id', '=', urlId).execute();
  const hourly = new Map<number, { visits: number; bots: number }>();
  const daily = new Map<string, number>();
  for (const v of visits) {
    const hour = Math.floor(v.visited_at_ms / HOUR_MS);
    const h = hourly.get(hour) ?? { visits: 0, bots: 0 };
    h.visits++;
    h.bots += Number(v.bot);
    hourly.set(hour, h);
    const day = Math.floor(v.visited_at_ms / DAY_MS);
    for (const [dimension, value] of [
      ['referrer', v.referrer_host],
      ['country', v.country],
      ['browser', v.browser],
      ['os', v.os],
      ['device', v.device],
    ]) {
      // Each day counts in its day and in its 8- and 64-day blocks.
      for (const span of [0, 3, 6]) {
        const key = `${span}|${Math.floor(day / 2 ** span) * 2 ** span}|${dimension}|${value ?? ''}`;
        daily.set(key, (daily.get(key) ?? 0) + 1);
      }
    }
  }
  const storedHourly = await db.selectFrom('visit_hourly').selectAll().where('url_id', '=', urlId).execute();
  const storedDaily = await db.selectFrom('visit_daily').selectAll().where('url_id', '=', urlId).execute();
  const sorted = <T>(map: Map<string | number, T>) => [...map].sort(([a], [b]) => String(a).localeCompare(String(b)));
  return {
    count: visits.length,
    recount: { hourly: sorted(hourly), daily: sorted(daily) },
    stored: {
      hourly: sorted(new Map(storedHourly.map((r) => [r.hour, { visits: Number(r.visits), bots: Number(r.bots) }]))),
      daily: sorted(
        new Map(storedDaily.map((r) => [`${r.span}|${r.day}|${r.dimension}|${r.value}`, Number(r.visits)])),
      ),
    },
  };
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
