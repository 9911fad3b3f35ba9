/**
 * How a setting's text becomes its value: each parser returns the value, or a `Problem` saying
 * what is wrong (the loader prefixes it with the variable and the value it was given).
 */

import type { DatabaseConfig } from './types.js';

export interface Problem {
  readonly problem: string;
}

export type Parser<T> = (raw: string) => T | Problem;

/** The value a parser gives when the text is acceptable. */
export type Parsed<P> = P extends Parser<infer T> ? Exclude<T, Problem> : never;

export function isProblem(value: unknown): value is Problem {
  return typeof value === 'object' && value !== null && 'problem' in value;
}

export function integer(min: number, max: number): Parser<number> {
  return (raw) => {
    if (!/^-?\d+$/.test(raw.trim())) return { problem: `must be an integer from ${min} to ${max}` };
    const value = Number(raw);
    if (value < min || value > max) return { problem: `must be an integer from ${min} to ${max}` };
    return value;
  };
}

export function decimal(min: number, max: number): Parser<number> {
  return (raw) => {
    const value = Number(raw.trim());
    if (raw.trim() === '' || !Number.isFinite(value) || value < min || value > max) {
      return { problem: `must be a number from ${min} to ${max}` };
    }
    return value;
  };
}

/** `auto`, which stands for `automatic()`, or what `parse` accepts. */
export function autoOr<A, T>(automatic: () => A, parse: Parser<T>): Parser<A | T> {
  return (raw) => (raw.trim() === 'auto' ? automatic() : parse(raw));
}

export const boolean: Parser<boolean> = (raw) => {
  const value = raw.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(value)) return true;
  if (['false', '0', 'no', 'off'].includes(value)) return false;
  return { problem: 'must be true or false' };
};

export const nonEmpty: Parser<string> = (raw) => (raw.trim() === '' ? { problem: 'must not be empty' } : raw.trim());

/** Any text, trimmed; empty: not set. */
export const optionalText: Parser<string | undefined> = (raw) => raw.trim() || undefined;

/** Any text as it is, spaces included (a password); empty: not set. */
export const optionalVerbatim: Parser<string | undefined> = (raw) => (raw === '' ? undefined : raw);

export function oneOf<const T extends string>(values: readonly T[]): Parser<T> {
  return (raw) =>
    (values as readonly string[]).includes(raw.trim())
      ? (raw.trim() as T)
      : { problem: `must be one of ${values.join(', ')}` };
}

/** Printable ASCII only: anything else cannot go into an HTTP header. */
export const headerValue: Parser<string> = (raw) =>
  /^[\x20-\x7e]+$/.test(raw) ? raw : { problem: 'must be printable ASCII, non-empty' };

export const databaseUrl: Parser<Pick<DatabaseConfig, 'kind' | 'url'>> = (raw) => {
  const value = raw.trim();
  if (value.startsWith('sqlite:')) {
    const file = value.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (file === '') return { problem: 'sqlite: needs a file path, e.g. sqlite:./data/urlshortener.db' };
    return { kind: 'sqlite', url: file };
  }
  if (value.startsWith('postgres://') || value.startsWith('postgresql://')) {
    try {
      new URL(value);
    } catch {
      return { problem: 'is not a valid postgres:// URL' };
    }
    return { kind: 'postgres', url: value };
  }
  return { problem: 'must start with sqlite: or postgres://' };
};

/** A comma-separated list of URL schemes, lower-cased, without their colons. */
export const schemes: Parser<string[]> = (raw) => {
  const list = raw
    .split(',')
    .map((s) => s.trim().toLowerCase().replace(/:$/, ''))
    .filter((s) => s !== '');
  if (list.length === 0) return { problem: 'must name at least one scheme, e.g. http,https' };
  const bad = list.find((s) => !/^[a-z][a-z0-9+.-]*$/.test(s));
  if (bad !== undefined) return { problem: `"${bad}" is not a URL scheme` };
  return list;
};

/** An optional URL with one of `protocols`; the empty default means "not set". */
export function optionalUrl(protocols: readonly string[]): Parser<string | undefined> {
  return (raw) => {
    const value = raw.trim();
    if (value === '') return undefined;
    try {
      if (protocols.includes(new URL(value).protocol)) return value;
    } catch {
      // reported below
    }
    return { problem: `must be a ${protocols.map((p) => `${p}//`).join(' or ')} URL` };
  };
}

export const optionalNatsUrl: Parser<string | undefined> = (raw) => {
  const value = raw.trim();
  if (value === '') return undefined;
  return /^nats:\/\/[^\s/]+$/.test(value) ? value : { problem: 'must look like nats://host:4222' };
};

/** A prefix of stream and subject names: letters, digits, `_` and `-` (maybe none). */
export const namePrefix: Parser<string> = (raw) =>
  /^[A-Za-z0-9_-]*$/.test(raw.trim()) ? raw.trim() : { problem: 'letters, digits, _ and - only' };

export const SECRET_KEY_MIN_BYTES = 32;

/** A signing key of at least SECRET_KEY_MIN_BYTES bytes; empty: not set. */
export const optionalSecret: Parser<string | undefined> = (raw) => {
  if (raw === '') return undefined;
  if (Buffer.byteLength(raw, 'utf8') < SECRET_KEY_MIN_BYTES) {
    return { problem: `must be at least ${SECRET_KEY_MIN_BYTES} bytes (e.g. \`openssl rand -base64 48\`)` };
  }
  return raw;
};
