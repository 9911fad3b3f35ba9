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
  /** When the link stops answering (canonical RFC 3339); null or absent: never. */
  readonly expires_at?: string | null;
  /** How many redirects the link answers at most; null or absent: no limit. */
  readonly max_visits?: number | null;
}

/**
 * `UrlMappingRead` as one caller sees it: `owner` only for the owner and administrators;
 * `expires_at` and `max_visits` only when set (a link without them reads exactly as spec §2.1).
 */
export type UrlMappingView = Omit<UrlMapping, 'owner' | 'expires_at' | 'max_visits'> & {
  readonly owner?: number;
  readonly expires_at?: string;
  readonly max_visits?: number;
};

/** Why a link stopped answering: its `expires_at` passed, or it answered its `max_visits`. */
export type ExpiryReason = 'expired_at' | 'max_visits';

/**
 * A link's limits as the repository takes them (issue 15 contract): undefined leaves the limit as
 * it is (on create: none), null clears it.
 */
export interface LinkLimits {
  readonly expiresAt?: Date | null;
  readonly maxVisits?: number | null;
}

/** The limits as the wire carries them (`expires_at`, `max_visits`); null clears. */
export interface LinkLimitsBody {
  readonly expires_at?: string | null;
  readonly max_visits?: number | null;
}

/** `UrlMappingCreate`: every field is required (`owner` is the service's, never the body's); the limits are optional. */
export interface NewUrlMapping extends LinkLimits {
  readonly code: string;
  readonly url: string;
  readonly created_at: string;
  readonly click_count: number;
  readonly owner?: number | null;
}

/** `UrlMappingUpdate`: an omitted or null field stays as it is, but a null limit is cleared. */
export interface UrlMappingChanges extends LinkLimits {
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

/** Largest `max_visits` accepted (an exact JSON integer). */
export const MAX_VISITS_MAX = Number.MAX_SAFE_INTEGER;

/**
 * The limits of a body, checked: `expires_at` a valid date-time (in the future when `future`,
 * as on create: a link that never answers is refused), `max_visits` an integer of at least 1
 * (the schema checks the type and minimum first). Absent fields stay absent, nulls stay null.
 */
export function parseLinkLimits(body: LinkLimitsBody, now: number, future: boolean): LinkLimits {
  const limits: { expiresAt?: Date | null; maxVisits?: number | null } = {};
  if (body.expires_at !== undefined) {
    if (body.expires_at === null) limits.expiresAt = null;
    else {
      const canonical = canonicalTimestamp(body.expires_at);
      if (canonical === undefined) {
        throw errors.validation(`body: 'expires_at' must be a valid date-time (RFC 3339, e.g. 2030-01-31T12:00:00Z)`);
      }
      const at = new Date(canonical);
      if (future && at.getTime() <= now) {
        throw errors.validation(
          `body: 'expires_at' must be in the future (it is ${canonical}, now is ${new Date(now).toISOString()})`,
        );
      }
      limits.expiresAt = at;
    }
  }
  if (body.max_visits !== undefined) {
    const max = body.max_visits;
    if (max !== null && (!Number.isInteger(max) || max < 1 || max > MAX_VISITS_MAX)) {
      throw errors.validation(`body: 'max_visits' must be an integer from 1 to ${MAX_VISITS_MAX}`);
    }
    limits.maxVisits = max;
  }
  return limits;
}

/** Why `mapping` no longer answers at `now`, or undefined while it does. */
export function expiryReason(
  mapping: { readonly expires_at?: string | null; readonly max_visits?: number | null; readonly visits_used?: number },
  now: number,
): ExpiryReason | undefined {
  if (mapping.expires_at != null && Date.parse(mapping.expires_at) <= now) return 'expired_at';
  if (mapping.max_visits != null && (mapping.visits_used ?? 0) >= mapping.max_visits) return 'max_visits';
  return undefined;
}

/** The stored form of an instant: canonical RFC 3339 text (what both backends read back). */
export const storedInstant = (at: Date): string => canonicalTimestamp(at.toISOString())!;
