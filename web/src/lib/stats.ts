/**
 * The statistics page's rules, kept apart from the page so they can be tested: which range and
 * interval a choice means, how it is written in the address, and how buckets and top entries read.
 */

export type StatsInterval = 'hour' | 'day' | 'week';
export type PresetId = '24h' | '7d' | '30d' | '90d';
export type RangeChoice = PresetId | 'custom';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const MS: Record<StatsInterval, number> = { hour: HOUR, day: DAY, week: 7 * DAY };

export const PRESETS: ReadonlyArray<{ readonly id: PresetId; readonly label: string; readonly ms: number }> = [
  { id: '24h', label: '24 hours', ms: DAY },
  { id: '7d', label: '7 days', ms: 7 * DAY },
  { id: '30d', label: '30 days', ms: 30 * DAY },
  { id: '90d', label: '90 days', ms: 90 * DAY },
];
export const INTERVALS: ReadonlyArray<{ readonly id: StatsInterval; readonly label: string }> = [
  { id: 'hour', label: 'Hour' },
  { id: 'day', label: 'Day' },
  { id: 'week', label: 'Week' },
];
/** More points than this and a chart is a smear: the interval must be coarser. */
export const MAX_POINTS = 800;

export interface StatsRange {
  readonly choice: RangeChoice;
  readonly from: Date;
  readonly to: Date;
  readonly interval: StatsInterval;
}

/** How many buckets of `interval` the range holds (a partial one counts). */
export const pointsOf = (from: Date, to: Date, interval: StatsInterval) =>
  Math.ceil((to.getTime() - from.getTime()) / MS[interval]);

/** The intervals that give a readable chart for the range: at most MAX_POINTS buckets, and more than one where possible. */
export function intervalsFor(from: Date, to: Date): StatsInterval[] {
  return INTERVALS.map((i) => i.id).filter((i) => pointsOf(from, to, i) <= MAX_POINTS);
}

/** The interval a range starts with: hours up to two days, days up to four months, weeks beyond. */
export function defaultInterval(from: Date, to: Date): StatsInterval {
  const span = to.getTime() - from.getTime();
  return span <= 2 * DAY ? 'hour' : span <= 120 * DAY ? 'day' : 'week';
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** `YYYY-MM-DD` as the start of that day in UTC (the server's days are UTC days); null when it is not a date. */
export function utcDay(text: string): Date | null {
  const match = DATE.exec(text);
  if (!match) return null;
  const [, y, m, d] = match.map(Number) as [number, number, number, number];
  const date = new Date(Date.UTC(y, m - 1, d));
  return date.getUTCFullYear() === y && date.getUTCMonth() === m - 1 && date.getUTCDate() === d ? date : null;
}

/** The `YYYY-MM-DD` of a moment's UTC day. */
export const dayText = (date: Date) => date.toISOString().slice(0, 10);

/** A custom range from the first day's start to the last day's end, or why it is not one. */
export function customRange(fromDay: string, toDay: string): { from: Date; to: Date } | { error: string } {
  const from = utcDay(fromDay);
  const last = utcDay(toDay);
  if (!from || !last) return { error: 'Enter both dates, From and To.' };
  if (last < from) return { error: 'The To date is before the From date.' };
  return { from, to: new Date(last.getTime() + DAY) };
}

/**
 * The range an address asks for (`?range=7d&interval=day`, or `?from=2026-11-01&to=2026-11-07`),
 * the last 30 days per day when it asks for nothing readable.
 */
export function rangeFromQuery(query: URLSearchParams, now: Date): StatsRange {
  const asked = query.get('interval');
  const pick = (from: Date, to: Date) => {
    const allowed = intervalsFor(from, to);
    return allowed.includes(asked as StatsInterval) ? (asked as StatsInterval) : defaultInterval(from, to);
  };
  const custom =
    query.has('from') || query.has('to') ? customRange(query.get('from') ?? '', query.get('to') ?? '') : null;
  if (custom && !('error' in custom)) return { choice: 'custom', ...custom, interval: pick(custom.from, custom.to) };
  const preset = PRESETS.find((p) => p.id === query.get('range')) ?? PRESETS[2]!;
  const from = new Date(now.getTime() - preset.ms);
  return { choice: preset.id, from, to: now, interval: pick(from, now) };
}

/** The address query of a range, the inverse of `rangeFromQuery`. */
export function rangeToQuery(range: StatsRange): string {
  const query = new URLSearchParams(
    range.choice === 'custom'
      ? { from: dayText(range.from), to: dayText(new Date(range.to.getTime() - DAY)) }
      : { range: range.choice },
  );
  query.set('interval', range.interval);
  return query.toString();
}

/**
 * A bucket's label: hours in the reader's own time; days and weeks by their UTC date, as the server
 * cuts them. `locale` and `timeZone` are there for tests.
 */
export function bucketLabel(start: string, interval: StatsInterval, locale?: string, timeZone?: string): string {
  const date = new Date(start);
  if (interval === 'hour') {
    return new Intl.DateTimeFormat(locale, {
      day: 'numeric',
      month: 'short',
      hour: '2-digit',
      minute: '2-digit',
      ...(timeZone ? { timeZone } : {}),
    }).format(date);
  }
  const day = new Intl.DateTimeFormat(locale, { day: 'numeric', month: 'short', timeZone: 'UTC' }).format(date);
  return interval === 'week' ? `Week of ${day}` : day;
}

/** The range as a sentence names it: "1 Nov 2026 – 7 Nov 2026". */
export function rangeText(range: Pick<StatsRange, 'from' | 'to'>, locale?: string, timeZone?: string): string {
  const format = new Intl.DateTimeFormat(locale, {
    dateStyle: 'medium',
    timeStyle: 'short',
    ...(timeZone ? { timeZone } : {}),
  });
  return `${format.format(range.from)} – ${format.format(range.to)}`;
}

export interface StatsTotals {
  readonly visits: number;
  readonly bots: number;
  readonly humans: number;
  readonly unique_visitors: number;
}

/** The bots' share of the visits ("16.7%", a dash when there were none) and its counts ("2 of 12 visits"). */
export function botShare(
  { visits, bots }: Pick<StatsTotals, 'visits' | 'bots'>,
  locale?: string,
): { percent: string; counts: string } {
  if (visits === 0) return { percent: '–', counts: 'No visits' };
  const percent = new Intl.NumberFormat(locale, { style: 'percent', maximumFractionDigits: 1 }).format(bots / visits);
  return { percent, counts: `${bots} of ${visits} ${visits === 1 ? 'visit' : 'visits'}` };
}

export type TopKind = 'referrers' | 'countries' | 'browsers' | 'os' | 'devices';

export const TOP_KINDS: ReadonlyArray<{ readonly kind: TopKind; readonly title: string }> = [
  { kind: 'referrers', title: 'Referrers' },
  { kind: 'countries', title: 'Countries' },
  { kind: 'browsers', title: 'Browsers' },
  { kind: 'os', title: 'Operating systems' },
  { kind: 'devices', title: 'Devices' },
];

const DEVICES: Record<string, string> = {
  desktop: 'Desktop',
  mobile: 'Mobile',
  tablet: 'Tablet',
  bot: 'Bot',
  other: 'Other',
};

/** A top entry as people read it: a country's name, a device class in words, a missing value explained. */
export function topLabel(kind: TopKind, value: string | null, locale?: string): string {
  if (value === null || value === '') return kind === 'referrers' ? 'Direct or unknown' : 'Unknown';
  if (kind === 'devices') return DEVICES[value] ?? value;
  if (kind === 'countries') {
    try {
      const name = new Intl.DisplayNames(locale ? [locale] : undefined, { type: 'region' }).of(value);
      return name && name !== value ? `${name} (${value})` : value;
    } catch {
      return value; // not a region code Intl knows
    }
  }
  return value;
}

/** The file name a download of a link's visits is saved as. */
export const visitsFileName = (code: string, range: Pick<StatsRange, 'from' | 'to'>) =>
  `${code}-visits-${dayText(range.from)}-to-${dayText(new Date(range.to.getTime() - 1))}.csv`;
