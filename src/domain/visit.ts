/** Visits and their statistics (issue 15): what a counted redirect leaves behind. */

export const DEVICE_CLASSES = ['desktop', 'mobile', 'tablet', 'bot', 'other'] as const;
export type DeviceClass = (typeof DEVICE_CLASSES)[number];

/** The dimensions the daily rollups count visits by, as stored and as `top` names them. */
export const VISIT_DIMENSIONS = {
  referrer: 'referrers',
  country: 'countries',
  browser: 'browsers',
  os: 'os',
  device: 'devices',
} as const;
export type VisitDimension = keyof typeof VISIT_DIMENSIONS;

export const STATS_INTERVALS = ['hour', 'day', 'week'] as const;
export type StatsInterval = (typeof STATS_INTERVALS)[number];

/** What a visit row holds: derived from the request, never its address or full `User-Agent`. */
export interface VisitRecord {
  readonly urlId: number;
  /** Unix milliseconds. */
  readonly visitedAt: number;
  readonly referrerHost: string | null;
  readonly browser: string | null;
  readonly os: string | null;
  readonly device: DeviceClass;
  readonly bot: boolean;
  readonly country: string | null;
}

/** A visit as the API shows it. */
export interface VisitView {
  readonly visited_at: string;
  readonly referrer_host: string | null;
  readonly browser: string | null;
  readonly os: string | null;
  readonly device: DeviceClass;
  readonly bot: boolean;
  readonly country: string | null;
}

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;
/** Unix time of Monday 1970-01-05 00:00 UTC: weeks start on Mondays (ISO 8601). */
const FIRST_MONDAY_MS = 4 * DAY_MS;
const WEEK_MS = 7 * DAY_MS;

export const hourOf = (ms: number) => Math.floor(ms / HOUR_MS);
export const dayOf = (ms: number) => Math.floor(ms / DAY_MS);

/** The start of the interval that holds `ms`. */
export function intervalStart(ms: number, interval: StatsInterval): number {
  if (interval === 'hour') return hourOf(ms) * HOUR_MS;
  if (interval === 'day') return dayOf(ms) * DAY_MS;
  return Math.floor((ms - FIRST_MONDAY_MS) / WEEK_MS) * WEEK_MS + FIRST_MONDAY_MS;
}

export function intervalLength(interval: StatsInterval): number {
  return interval === 'hour' ? HOUR_MS : interval === 'day' ? DAY_MS : WEEK_MS;
}

export function toVisitView(row: VisitRecord): VisitView {
  return {
    visited_at: new Date(row.visitedAt).toISOString(),
    referrer_host: row.referrerHost,
    browser: row.browser,
    os: row.os,
    device: row.device,
    bot: row.bot,
    country: row.country,
  };
}

/** The host of a `Referer` header, lower-case; null when absent or not an absolute http(s) URL. */
export function referrerHost(referer: string | undefined): string | null {
  if (referer === undefined || referer === '') return null;
  try {
    const url = new URL(referer);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
    return url.hostname.toLowerCase() || null;
  } catch {
    return null;
  }
}

/** An ISO 3166-1 alpha-2 code from a proxy's country header, upper case; null for anything else (`XX`, `T1`, …). */
export function countryCode(value: string | undefined): string | null {
  if (value === undefined || value.length !== 2) return null;
  const code = value.toUpperCase();
  if (!/^[A-Z]{2}$/.test(code) || code === 'XX' || code === 'ZZ') return null;
  return code;
}
