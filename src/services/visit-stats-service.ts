import { errors } from '../domain/errors.js';
import type { UrlMapping } from '../domain/url-mapping.js';
import {
  DAY_MS,
  HOUR_MS,
  hourOf,
  intervalLength,
  intervalStart,
  type StatsInterval,
  toVisitView,
  VISIT_DIMENSIONS,
  type VisitDimension,
  type VisitView,
} from '../domain/visit.js';
import { estimateVisitors } from '../domain/visit-day.js';
import type { Clock } from '../ports/clock.js';
import type { UrlMappingRepository } from '../ports/url-mapping-repository.js';
import type { StoredVisitDay, VisitPageRow, VisitRepository } from '../ports/visit-repository.js';
import type { Caller } from './execution-service.js';

/** Intervals a series may have (a year by the hour is 8,760). */
const MAX_SERIES = 10_000;
const DEFAULT_RANGE_MS = 30 * DAY_MS;

export interface StatsQuery {
  readonly from?: string | undefined;
  readonly to?: string | undefined;
  readonly interval?: StatsInterval | undefined;
  readonly top?: number | undefined;
}

export interface TopEntry {
  readonly value: string | null;
  readonly visits: number;
}

export interface LinkStats {
  readonly code: string;
  readonly from: string;
  readonly to: string;
  readonly interval: StatsInterval;
  readonly totals: { visits: number; bots: number; humans: number; unique_visitors: number };
  readonly series: { start: string; visits: number; bots: number }[];
  readonly top: Record<(typeof VISIT_DIMENSIONS)[keyof typeof VISIT_DIMENSIONS], TopEntry[]>;
}

export interface VisitsQuery {
  readonly from?: string | undefined;
  readonly to?: string | undefined;
  /** Undefined: every visit in the range (the CSV stream). */
  readonly limit?: number | undefined;
  readonly cursor?: string | undefined;
}

export interface VisitsPage {
  readonly items: VisitView[];
  readonly next_cursor: string | null;
}

/**
 * `GET /api/v1/links/{code}/stats` and `/visits`: for the link's owner and administrators only
 * (anyone else gets 404, as if the link were not there). Statistics come from the rollups alone.
 */
export class VisitStatsService {
  constructor(
    private readonly mappings: Pick<UrlMappingRepository, 'findByCode'>,
    private readonly visits: VisitRepository,
    /** VISIT_RETENTION_DAYS: statistics read nothing before it (its day row may hold pruned visits). */
    private readonly retentionDays: number = Number.POSITIVE_INFINITY,
    private readonly clock: Clock = { now: () => Date.now() },
  ) {}

  async stats(code: string, query: StatsQuery, caller: Caller | undefined): Promise<LinkStats> {
    const mapping = await this.authorise(code, caller);
    const { from, to } = this.range(query);
    const interval = query.interval ?? 'day';
    const top = query.top ?? 10;
    const first = intervalStart(from, interval);
    const step = intervalLength(interval);
    if (Math.ceil((to - first) / step) > MAX_SERIES) {
      throw errors.validation(
        `The range holds more than ${MAX_SERIES} intervals of one ${interval}; pick a longer interval.`,
      );
    }
    // Nothing before the retention cutoff (the row of the cutoff's day still counts its pruned
    // visits), and no day after tomorrow (no visit is stamped then, whatever an instance's clock).
    const now = this.clock.now();
    const kept = Math.max(from, now - this.retentionDays * DAY_MS);
    const days = await this.visits.days({ urlId: mapping.id, from: kept, to: Math.min(to, now + 2 * DAY_MS) });
    const { series, visits, bots } = seriesOf(days, { from: kept, to, first, step, interval });
    let unique = 0;
    for (const { data } of days) unique += estimateVisitors(data.sketch);
    return {
      code: mapping.code,
      from: new Date(from).toISOString(),
      to: new Date(to).toISOString(),
      interval,
      totals: { visits, bots, humans: visits - bots, unique_visitors: unique },
      series,
      top: topLists(days, top),
    };
  }

  /** One page, newest first; `limit` undefined: everything in the range (one page). */
  async page(code: string, query: VisitsQuery, caller: Caller | undefined): Promise<VisitsPage> {
    const mapping = await this.authorise(code, caller);
    const { from, to } = this.range(query);
    const before = query.cursor === undefined ? undefined : parseCursor(query.cursor);
    const limit = query.limit;
    const rows = await this.visits.page({
      urlId: mapping.id,
      from,
      to,
      limit: limit === undefined ? Number.MAX_SAFE_INTEGER : limit + 1,
      ...(before ? { before } : {}),
    });
    const more = limit !== undefined && rows.length > limit;
    const items = more ? rows.slice(0, limit) : rows;
    return { items: items.map(toVisitView), next_cursor: more ? cursorOf(items[items.length - 1]!) : null };
  }

  /**
   * Every visit in the range, newest first, a page at a time (the CSV stream); the link is
   * checked once, before the first page.
   */
  async *all(code: string, query: Omit<VisitsQuery, 'limit' | 'cursor'>, caller: Caller | undefined) {
    const mapping = await this.authorise(code, caller);
    const { from, to } = this.range(query);
    let before: { visitedAt: number; id: number } | undefined;
    for (;;) {
      const rows = await this.visits.page({ urlId: mapping.id, from, to, limit: 1000, ...(before ? { before } : {}) });
      for (const row of rows) yield toVisitView(row);
      if (rows.length < 1000) return;
      const last = rows[rows.length - 1]!;
      before = { visitedAt: last.visitedAt, id: last.id };
    }
  }

  /** The link, when `caller` owns it or is an administrator; otherwise 404 (as if it were not there). */
  async authorise(code: string, caller: Caller | undefined): Promise<UrlMapping> {
    const mapping = await this.mappings.findByCode(code);
    if (mapping === undefined || caller === undefined) throw errors.mappingNotFound();
    if (caller.role !== 'admin' && caller.userId !== (mapping.owner ?? null)) throw errors.mappingNotFound();
    return mapping;
  }

  private range(query: { from?: string | undefined; to?: string | undefined }): { from: number; to: number } {
    const to = query.to === undefined ? this.clock.now() : parseInstant(query.to, `to`);
    const from = query.from === undefined ? to - DEFAULT_RANGE_MS : parseInstant(query.from, `from`);
    if (from >= to) throw errors.validation('`from` must be before `to`.');
    return { from, to };
  }
}

function parseInstant(text: string, name: string): number {
  const ms = Date.parse(text);
  if (Number.isNaN(ms) || !/^\d{4}-\d{2}-\d{2}/.test(text)) {
    throw errors.validation(`\`${name}\` must be an RFC 3339 date-time, such as 2026-01-31T00:00:00Z.`);
  }
  return ms;
}

const cursorOf = (row: VisitPageRow) => Buffer.from(`${row.visitedAt}:${row.id}`).toString('base64url');

function parseCursor(cursor: string): { visitedAt: number; id: number } {
  const match = /^(\d+):(\d+)$/.exec(Buffer.from(cursor, 'base64url').toString());
  if (match === null) throw errors.validation('`cursor` is not one this service gave.');
  return { visitedAt: Number(match[1]), id: Number(match[2]) };
}

/** One entry per interval from `first` up to `to`, zeros included, from the hours in [from, to). */
function seriesOf(
  days: readonly StoredVisitDay[],
  range: { from: number; to: number; first: number; step: number; interval: StatsInterval },
) {
  const { from, to, first, step, interval } = range;
  const series: LinkStats['series'] = [];
  const index = new Map<number, number>();
  for (let start = first; start < to; start += step) {
    index.set(start, series.length);
    series.push({ start: new Date(start).toISOString(), visits: 0, bots: 0 });
  }
  let visits = 0;
  let bots = 0;
  const firstHour = hourOf(from);
  const endHour = Math.ceil(to / HOUR_MS);
  for (const { day, data } of days) {
    for (let h = 0; h < 24; h++) {
      const hour = day * 24 + h;
      const count = data.hours[h]!;
      if (count === 0 || hour < firstHour || hour >= endHour) continue;
      const entry = series[index.get(intervalStart(hour * HOUR_MS, interval))!];
      if (entry === undefined) continue;
      entry.visits += count;
      entry.bots += data.bots[h]!;
      visits += count;
      bots += data.bots[h]!;
    }
  }
  return { series, visits, bots };
}

/** The days' value counts added up per dimension, the `top` largest of each (`''` read as null). */
function topLists(days: readonly StoredVisitDay[], top: number): LinkStats['top'] {
  const tops = {} as Record<string, TopEntry[]>;
  for (const [dimension, name] of Object.entries(VISIT_DIMENSIONS) as [VisitDimension, string][]) {
    const counts = new Map<string, number>();
    for (const { data } of days) {
      for (const [value, visits] of Object.entries(data.values[dimension])) {
        counts.set(value, (counts.get(value) ?? 0) + visits);
      }
    }
    tops[name] = [...counts]
      .map(([value, visits]) => ({ value: value === '' ? null : value, visits }))
      .sort((a, b) => b.visits - a.visits || (a.value ?? '').localeCompare(b.value ?? ''))
      .slice(0, top);
  }
  return tops as LinkStats['top'];
}
