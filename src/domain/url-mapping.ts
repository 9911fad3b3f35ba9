import { errors } from './errors.js';
import { canonicalTimestamp } from './timestamp.js';

export const CODE_PATTERN = /^[a-zA-Z0-9]+$/;
export const CODE_MIN_LENGTH = 6;
export const CODE_MAX_LENGTH = 10;

/** A stored mapping, as the service reads and returns it (`UrlMappingRead`). */
export interface UrlMapping {
  readonly id: number;
  readonly code: string;
  readonly url: string;
  readonly created_at: string;
  readonly click_count: number;
  /** The id of the user who created it; null or absent for a mapping created anonymously. */
  readonly owner?: number | null;
}

/** `UrlMappingRead` as one caller sees it: `owner` only for the owner and administrators. */
export type UrlMappingView = Omit<UrlMapping, 'owner'> & { readonly owner?: number };

/** `UrlMappingCreate`: every field is required (`owner` is the service's, never the body's). */
export interface NewUrlMapping {
  readonly code: string;
  readonly url: string;
  readonly created_at: string;
  readonly click_count: number;
  readonly owner?: number | null;
}

/** `UrlMappingUpdate`: an omitted or null field stays as it is. */
export interface UrlMappingChanges {
  readonly code?: string | null;
  readonly url?: string | null;
  readonly created_at?: string | null;
  readonly click_count?: number | null;
}

export interface UrlRules {
  readonly maxLength: number;
  readonly allowedSchemes: readonly string[];
}

// Whitespace (ASCII and Unicode) and control characters anywhere in a target URL.
const FORBIDDEN_URL_CHARS = /[\s\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202f\u2060\ufeff]/;
const HAS_AUTHORITY = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//;
const SPECIAL_SCHEMES = new Set(['http', 'https', 'ftp', 'ws', 'wss']);

/** Throws a 422 naming the broken rule when `url` is not an acceptable redirect target. */
export function assertValidTargetUrl(url: string, rules: UrlRules): void {
  if (url.length > rules.maxLength) {
    throw errors.validation(`body: 'url' must be at most ${rules.maxLength} characters`);
  }
  if (FORBIDDEN_URL_CHARS.test(url)) {
    throw errors.validation(`body: 'url' must not contain whitespace or control characters`);
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw errors.validation(`body: 'url' must be an absolute URL`);
  }
  const scheme = parsed.protocol.slice(0, -1);
  if (!rules.allowedSchemes.includes(scheme)) {
    throw errors.validation(`body: 'url' scheme must be one of ${rules.allowedSchemes.join(', ')}`);
  }
  if (SPECIAL_SCHEMES.has(scheme) && (!HAS_AUTHORITY.test(url) || parsed.hostname === '')) {
    throw errors.validation(`body: 'url' must have a host (${scheme}://host/…)`);
  }
}

/** The `Location` header value: the URL as given, or its percent-encoded form if it is not plain ASCII. */
export function locationFor(url: string): string {
  return /^[\x21-\x7e]+$/.test(url) ? url : new URL(url).href;
}

/** Largest `click_count` accepted: beyond it a JSON number no longer carries an exact integer. */
export const CLICK_COUNT_MAX = Number.MAX_SAFE_INTEGER;

/** Throws a 422 when `count` is too large to be stored and returned exactly. */
export function assertValidClickCount(count: number): void {
  if (count > CLICK_COUNT_MAX) throw errors.validation(`body: 'click_count' must be at most ${CLICK_COUNT_MAX}`);
}

export function assertCodeNotReserved(code: string, reserved: ReadonlySet<string>): void {
  if (reserved.has(code.toLowerCase())) throw errors.codeReserved();
}

/** The canonical form of `created_at`; the schema has already checked the format. */
export function normaliseCreatedAt(value: string): string {
  const canonical = canonicalTimestamp(value);
  if (canonical === undefined) throw errors.validation(`body: 'created_at' must be a valid date-time`);
  return canonical;
}
