/**
 * Timestamps are accepted as RFC 3339 / ISO 8601 date-times and kept in one canonical form:
 * UTC, `YYYY-MM-DDTHH:MM:SS[.ffffff]Z`, fraction truncated to microseconds (what PostgreSQL
 * keeps) with trailing zeros dropped. A value without an offset is read as UTC.
 */

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))?$/;

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

function daysInMonth(year: number, month: number): number {
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  return [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] ?? 0;
}

/** The last answer: a body's timestamp is checked by validation, then normalised, one after the other. */
let lastText: string | undefined;
let lastCanonical: string | undefined;

/** Returns the canonical UTC form, or undefined when the text is not a valid date-time. */
export function canonicalTimestamp(text: string): string | undefined {
  if (text === lastText) return lastCanonical;
  lastCanonical = parseTimestamp(text);
  lastText = text;
  return lastCanonical;
}

function parseTimestamp(text: string): string | undefined {
  const m = DATE_TIME.exec(text);
  if (!m) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hour > 23 || minute > 59 || second > 59) return undefined;
  let offsetMinutes = 0;
  if (m[9] !== undefined) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    offsetMinutes = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute - offsetMinutes, second, 0);
  const utcYear = date.getUTCFullYear();
  if (utcYear < 1 || utcYear > 9999) return undefined;
  const fraction = (m[7] ?? '').slice(0, 6).replace(/0+$/, '');
  return (
    `${pad(utcYear, 4)}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())}` +
    `T${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}:${pad(date.getUTCSeconds())}` +
    `${fraction ? `.${fraction}` : ''}Z`
  );
}

export function isValidTimestamp(text: string): boolean {
  return canonicalTimestamp(text) !== undefined;
}
