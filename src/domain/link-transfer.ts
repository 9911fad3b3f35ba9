import { AppError, errors } from './errors.js';
import { canonicalTimestamp } from './timestamp.js';
import {
  assertCodeNotReserved,
  assertValidClickCount,
  assertValidTargetUrl,
  CODE_MAX_LENGTH,
  CODE_MIN_LENGTH,
  CODE_PATTERN,
  type NewUrlMapping,
  parseLinkLimits,
  type UrlRules,
} from './url-mapping.js';

/** The columns (CSV) and keys (JSON) of an export, and what an import reads, in this order. */
export const TRANSFER_COLUMNS = ['code', 'url', 'created_at', 'click_count', 'expires_at', 'max_visits'] as const;
export type TransferColumn = (typeof TRANSFER_COLUMNS)[number];

/** Most data rows one `POST /api/v1/links/import` takes (the command line takes any number). */
export const IMPORT_MAX_ROWS = 100_000;

/** One link as exported, and as an import file gives it once checked. */
export interface LinkRecord {
  readonly code: string;
  readonly url: string;
  readonly created_at: string;
  readonly click_count: number;
  readonly expires_at: string | null;
  readonly max_visits: number | null;
}

/** A mapping to import: what a create writes, its limits (`expiresAt`, `maxVisits`) when the row gives them. */
export type ImportedLink = NewUrlMapping;

/** One row of an import file as read: CSV gives an object of strings, JSON any value (an object, when right). */
export type RawRow = unknown;

/** The code a row gives, if it gives one as text (for the report of a refused row). */
export const codeOf = (raw: RawRow): string | null => (isObject(raw) && typeof raw.code === 'string' ? raw.code : null);

const isObject = (raw: RawRow): raw is Readonly<Record<string, unknown>> =>
  typeof raw === 'object' && raw !== null && !Array.isArray(raw);

export type RowStatus = 'created' | 'taken' | 'refused';

/** One line of the import report; `row` counts data rows from 1. */
export interface RowOutcome {
  readonly row: number;
  readonly code: string | null;
  readonly status: RowStatus;
  readonly detail?: string;
}

export interface ImportReport {
  readonly dry_run: boolean;
  readonly totals: { rows: number; created: number; taken: number; refused: number };
  readonly rows: RowOutcome[];
  /** Set when the import stopped part-way (the database failed): why, and what to do. */
  readonly detail?: string;
}

/** What a row is checked against: the rules of the create routes. */
export interface RowRules {
  readonly urls: UrlRules;
  readonly reservedCodes: ReadonlySet<string>;
}

const KNOWN = new Set<string>(TRANSFER_COLUMNS);

/** A field left out: absent, null, or (CSV) an empty cell. */
const isBlank = (value: unknown) => value === undefined || value === null || value === '';

/** An integer field: a JSON integer, or (CSV) its decimal digits. */
function integerOf(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? value : undefined;
  if (typeof value === 'string' && /^\d{1,16}$/.test(value)) {
    const n = Number(value);
    return Number.isSafeInteger(n) ? n : undefined;
  }
  return undefined;
}

/** The message of a create rule, without the `body: ` of the routes' answers. */
const ruleMessage = (error: AppError) => error.detail.replace(/^body: /, '');

/**
 * Checks one row with the rules of the create routes (code syntax, reserved codes, target URL,
 * click count) and the lifecycle fields; the link to write, or why the row is refused.
 * `now` is the `created_at` of a row without one.
 */
export function checkRow(raw: RawRow, rules: RowRules, now: string): ImportedLink | { refused: string } {
  if (!isObject(raw)) return { refused: 'a row must be an object' };
  const unknown = Object.keys(raw).find((key) => !KNOWN.has(key));
  if (unknown !== undefined) return { refused: `unknown field '${unknown}' (known: ${TRANSFER_COLUMNS.join(', ')})` };
  const { code, url } = raw;
  if (isBlank(code)) return { refused: "'code' is required" };
  if (typeof code !== 'string') return { refused: "'code' must be a string" };
  if (code.length < CODE_MIN_LENGTH || code.length > CODE_MAX_LENGTH || !CODE_PATTERN.test(code)) {
    return { refused: `'code' must be ${CODE_MIN_LENGTH} to ${CODE_MAX_LENGTH} letters and digits` };
  }
  if (isBlank(url)) return { refused: "'url' is required" };
  if (typeof url !== 'string') return { refused: "'url' must be a string" };
  let created_at = now;
  if (!isBlank(raw.created_at)) {
    const canonical = typeof raw.created_at === 'string' ? canonicalTimestamp(raw.created_at) : undefined;
    if (canonical === undefined) return { refused: "'created_at' must be an RFC 3339 date-time" };
    created_at = canonical;
  }
  let click_count = 0;
  if (!isBlank(raw.click_count)) {
    const n = integerOf(raw.click_count);
    if (n === undefined || n < 0) return { refused: "'click_count' must be an integer >= 0" };
    click_count = n;
  }
  if (!isBlank(raw.expires_at) && typeof raw.expires_at !== 'string') {
    return { refused: "'expires_at' must be an RFC 3339 date-time" };
  }
  const max_visits = isBlank(raw.max_visits) ? undefined : integerOf(raw.max_visits);
  if (max_visits === undefined && !isBlank(raw.max_visits)) return { refused: "'max_visits' must be an integer >= 1" };
  try {
    assertCodeNotReserved(code, rules.reservedCodes);
    assertValidTargetUrl(url, rules.urls);
    assertValidClickCount(click_count);
    // The rules of the create routes, but an expiry in the past is kept (the link answers 410 at
    // once), so that an export imports back whole.
    const limits = parseLinkLimits(
      {
        ...(isBlank(raw.expires_at) ? {} : { expires_at: raw.expires_at as string }),
        ...(max_visits === undefined ? {} : { max_visits }),
      },
      Date.now(),
      false,
    );
    return { code, url, created_at, click_count, ...limits };
  } catch (error) {
    if (error instanceof AppError) {
      return { refused: error.code === errors.codeReserved.code ? `'code' is reserved` : ruleMessage(error) };
    }
    throw error;
  }
}

/** A CSV field, quoted when it must be (RFC 4180). */
function csvField(value: string | number | null): string {
  if (value === null) return '';
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** The header line of a CSV export. */
export const CSV_HEADER = `${TRANSFER_COLUMNS.join(',')}\r\n`;

/** One link as a CSV line (with its line break). */
export function csvLine(record: LinkRecord): string {
  return `${TRANSFER_COLUMNS.map((column) => csvField(record[column])).join(',')}\r\n`;
}
