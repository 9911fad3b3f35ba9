import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { dialectOf } from '../../src/adapters/storage/database.js';
import { KyselyVisitJournal } from '../../src/adapters/storage/kysely-visit-journal.js';
import { KyselyVisitRepository } from '../../src/adapters/storage/kysely-visit-repository.js';
import { mergeJournal } from '../../src/composition/visits.js';
import type { DatabaseSchema } from '../../src/adapters/storage/schema.js';
import { DAY_MS, HOUR_MS, type VisitRecord } from '../../src/domain/visit.js';
import { decodeVisitDay, estimateVisitors } from '../../src/domain/visit-day.js';
import { decodeJournal, JournalMerge, type JournalVisits } from '../../src/domain/visit-journal.js';
import { decodeSegment, SEGMENT_VISITS, segmentsOf } from '../../src/domain/visit-segment.js';
import type {
  FoldStep,
  StatsRange,
  VisitBatch,
  VisitPageRow,
  VisitRepository,
} from '../../src/ports/visit-repository.js';

export const CHROME_WINDOWS =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';
export const SAFARI_IPHONE =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1';
export const SAFARI_IPAD =
  'Mozilla/5.0 (iPad; CPU OS 16_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/16.0 Mobile/15E148 Safari/604.1';
export const GOOGLEBOT = 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)';
export const USER_AGENTS = [CHROME_WINDOWS, SAFARI_IPHONE, SAFARI_IPAD, GOOGLEBOT, 'curl/8.5.0', undefined];
export const REFERRERS = ['https://news.example.com/a?b=c', 'http://blog.example.org/', undefined, 'not a url'];

/**
 * `rounds` redirects of each of `links` through a service (its user agents taken in turn from
 * USER_AGENTS), its visit buffer flushed after each round: a journal row a round at least. Answers
 * the redirects each link's code acknowledged (302), 0 for none.
 */
export async function visitEachLink(
  service: {
    readonly app: {
      inject(request: { method: 'GET'; url: string; headers: Record<string, string> }): Promise<{ statusCode: number }>;
    };
    readonly visits: { readonly buffer?: { flush(): Promise<unknown> } };
  },
  links: readonly { readonly code: string }[],
  rounds: number,
): Promise<Map<string, number>> {
  const acknowledged = new Map(links.map((link) => [link.code, 0]));
  for (let round = 0; round < rounds; round++) {
    for (const [i, link] of links.entries()) {
      const userAgent = USER_AGENTS[(i + round) % USER_AGENTS.length];
      const answer = await service.app.inject({
        method: 'GET',
        url: `/${link.code}`,
        headers: userAgent ? { 'user-agent': userAgent } : {},
      });
      if (answer.statusCode === 302) acknowledged.set(link.code, acknowledged.get(link.code)! + 1);
    }
    await service.visits.buffer!.flush();
  }
  return acknowledged;
}

/**
 * `visits` as the first format of a journal row held them (JSON text, before the binary one; an
 * upgrade may find such rows not yet merged): the distinct strings, the combinations as six
 * numbers, links and times as differences.
 */
export function firstFormatJournal(visits: JournalVisits): string {
  const s: string[] = [];
  const code = (value: string | null) =>
    value === null ? 0 : (s.includes(value) ? s.indexOf(value) : s.push(value) - 1) + 1;
  const g = visits.fields.flatMap((f) => [
    code(f.referrerHost),
    code(f.country),
    code(f.browser),
    code(f.os),
    code(f.device),
    f.bot ? 1 : 0,
  ]);
  const links = Array.from(visits.links);
  const times = Array.from(visits.times);
  return JSON.stringify({
    s,
    g,
    l: links.map((link, k) => link - (k === 0 ? 0 : links[k - 1]!)),
    n: links.map((_, k) => visits.starts[k + 1]! - visits.starts[k]!),
    f: times[0] ?? 0,
    t: times.map((time, v) => (v === 0 ? 0 : time - times[v - 1]!)),
    i: Array.from(visits.combinations),
    r: Array.from(visits.registers),
  });
}

/** A desktop Chrome visit of mapping `urlId` at `visitedAt`, nothing else known: a record as a batch holds it. */
export function chromeVisit(urlId: number, visitedAt: number): VisitRecord {
  return {
    urlId,
    visitedAt,
    referrerHost: null,
    browser: 'Chrome',
    os: null,
    device: 'desktop',
    bot: false,
    country: null,
  };
}

/**
 * A batch of `visits` as the visit buffer hands one over, as their segments (`visitors[i]`: the
 * hash of visit i's visitor, where given).
 */
export function visitBatch(id: string, visits: readonly VisitRecord[], visitors: readonly number[] = []): VisitBatch {
  return { id, segments: segmentsOf(visits, visitors), visits: visits.length };
}

/**
 * Every visit of `range`, page by page as the visits API asks for them (`limit` a page, each page
 * before the last row of the one before), newest first; fails past `maxPages` pages.
 */
export async function allVisitPages(
  visits: Pick<VisitRepository, 'page'>,
  range: StatsRange,
  limit: number,
  maxPages = 1_000,
): Promise<VisitPageRow[]> {
  const seen: VisitPageRow[] = [];
  let before: { visitedAt: number; id: number } | undefined;
  for (let pages = 0; pages < maxPages; pages++) {
    const page = await visits.page({ ...range, limit, ...(before ? { before } : {}) });
    seen.push(...page);
    if (page.length < limit) return seen;
    before = { visitedAt: page.at(-1)!.visitedAt, id: page.at(-1)!.id };
  }
  throw new Error(`more than ${maxPages} pages of ${limit} visits`);
}

/**
 * One fold run of `repository`, as an instance's: up to the newest segment now, `segments` a step,
 * from the first link to the last; its steps. `afterFirstStep` runs between its first two steps.
 */
export async function foldRun(
  repository: Pick<VisitRepository, 'foldMark' | 'fold'>,
  segments: number,
  afterFirstStep?: () => Promise<unknown>,
): Promise<Omit<FoldStep, 'heldMs'>[]> {
  const upTo = await repository.foldMark();
  const steps: Omit<FoldStep, 'heldMs'>[] = [];
  if (upTo === 0) return steps;
  for (let after: number | undefined = 0; after !== undefined;) {
    const { heldMs, ...step } = await repository.fold(segments, upTo, after);
    // Timing, not an outcome: the tests compare what the steps did (test "a fold step says how long…").
    if (!(Number.isFinite(heldMs) && heldMs >= 0)) throw new Error(`a fold step held the loop for ${heldMs} ms`);
    steps.push(step);
    after = step.through;
    if (steps.length === 1) await afterFirstStep?.();
  }
  return steps;
}

/** Every table visits are written to: their rows as text (to look for what must never be stored). */
export async function visitTablesText(db: Kysely<DatabaseSchema>): Promise<string> {
  const tables = [
    'visit_journal',
    'visit_journal_data',
    'visit_segments',
    'visit_unfolded',
    'visit_link_segments',
    'visit_days',
    'visit_batches',
  ] as const;
  const dumps: unknown[] = [];
  for (const table of tables) dumps.push(await db.selectFrom(table).selectAll().execute());
  return JSON.stringify(dumps);
}

type DayCounts = { hours: number[]; bots: number[]; values: Record<string, Record<string, number>> };

/**
 * The visit rows of mapping `urlId` as they were stored before segments (0070's table), decoded
 * from its segments, in id order: `bot` 1 or 0.
 */
export async function visitRowsOf(db: Kysely<DatabaseSchema>, urlId: number) {
  const segments = await db
    .selectFrom('visit_segments')
    .selectAll()
    .where('url_id', '=', urlId)
    .orderBy('id')
    .execute();
  return segments.flatMap((segment) =>
    decodeSegment(Number(segment.url_id), Number(segment.first_ms), segment.data).map((v, i) => ({
      id: Number(segment.id) * SEGMENT_VISITS + i,
      url_id: v.urlId,
      visited_at_ms: v.visitedAt,
      referrer_host: v.referrerHost,
      browser: v.browser,
      os: v.os,
      device: v.device,
      bot: v.bot ? 1 : 0,
      country: v.country,
    })),
  );
}

/**
 * Merges every journal row written so far into segments, as an instance's merge does (while a
 * serving instance may be merging some at the same time: until none is left).
 */
export async function mergeAllJournal(db: Kysely<DatabaseSchema>): Promise<void> {
  const journal = new KyselyVisitJournal(db, dialectOf(db));
  for (let runs = 0; await db.selectFrom('visit_journal').select('id').limit(1).executeTakeFirst(); runs++) {
    if (runs >= 100) throw new Error('the visit journal is still not merged after 100 runs');
    if ((await mergeJournal(journal)) === 0) await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Moves every journal row written so far into segments written as batches, not yet folded (as
 * before the merge folded its segments, or as migrations' data): what a test of the fold folds.
 */
export async function journalAsBatches(db: Kysely<DatabaseSchema>): Promise<number> {
  const journal = new KyselyVisitJournal(db, dialectOf(db));
  const repository = new KyselyVisitRepository(db, dialectOf(db));
  const rows = await journal.pending(Number.MAX_SAFE_INTEGER);
  const merge = new JournalMerge(
    rows.map((row) => ({ visits: decodeJournal(row.data), mergedThrough: row.mergedThrough })),
    { rows: 1_000, visits: 100_000 },
  );
  let segments = 0;
  for (let group = merge.take(); group !== undefined; group = merge.take()) {
    await repository.writeBatch({ id: randomUUID(), segments: group.rows, visits: group.visits });
    segments += group.rows.length;
  }
  await db
    .deleteFrom('visit_journal')
    .where(
      'id',
      'in',
      rows.map((row) => row.id),
    )
    .execute();
  return segments;
}

/**
 * The day rows recounted from the raw visits of `urlId` (visits and bots per hour, visits per
 * dimension value), and as stored once the journal is merged and every segment written is folded
 * (both run here first, as an instance's would): they must be equal. `visitors`: the distinct visitors the
 * stored sketches estimate, added up over the days (to hold against the test's own count).
 * Read straight from the tables.
 */
export async function rollupsAndRecount(db: Kysely<DatabaseSchema>, urlId: number) {
  await mergeAllJournal(db);
  const repository = new KyselyVisitRepository(db, dialectOf(db));
  // Until none is left (a serving instance may be folding some at the same time).
  while (await db.selectFrom('visit_unfolded').select('segment_id').limit(1).executeTakeFirst()) {
    await foldRun(repository, 1_000);
  }
  const visits = await visitRowsOf(db, urlId);
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

/** Visit rows of a mapping, by code (as visitRowsOf). */
export async function visitRows(db: Kysely<DatabaseSchema>, code: string) {
  const mapping = await db.selectFrom('url_mappings').select('id').where('code', '=', code).executeTakeFirst();
  return mapping ? visitRowsOf(db, Number(mapping.id)) : [];
}
