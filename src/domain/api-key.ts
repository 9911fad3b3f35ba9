/**
 * API keys: a long-lived credential a user makes for scripts and integrations. The key is
 * `us_` followed by 43 base64url characters (32 random bytes, 256 bits), shown once at creation
 * and stored only as its SHA-256 hash. `prefix` (the first 11 characters) is kept to tell keys
 * apart in a list; it gives away 48 of the 256 bits.
 */

export const API_KEY_MARKER = 'us_';
/** Random bytes in a key. */
export const API_KEY_RANDOM_BYTES = 32;
/** base64url of 32 bytes, unpadded. */
const API_KEY_BODY_LENGTH = 43;
export const API_KEY_PATTERN = new RegExp(`^${API_KEY_MARKER}[A-Za-z0-9_-]{${API_KEY_BODY_LENGTH}}$`);
/** How much of the key is kept in clear to recognise it: the marker and 8 characters. */
export const API_KEY_PREFIX_LENGTH = API_KEY_MARKER.length + 8;
export const API_KEY_NAME_MAX_LENGTH = 100;
/** `last_used_at` is written at most this often per key: not a database write per request. */
export const API_KEY_LAST_USED_RESOLUTION_MS = 60_000;

/** A key as listed: never the key itself nor its hash. */
export interface ApiKey {
  readonly id: number;
  readonly user_id: number;
  readonly name: string;
  readonly prefix: string;
  readonly created_at: string;
  readonly last_used_at: string | null;
  readonly expires_at: string | null;
  readonly revoked_at: string | null;
}

export interface NewApiKey {
  readonly user_id: number;
  readonly name: string;
  readonly prefix: string;
  readonly key_hash: string;
  readonly created_at: string;
  readonly expires_at: string | null;
}

/** Whether `text` has the shape of a key (cheap, before any hashing or lookup). */
export function looksLikeApiKey(text: string): boolean {
  return API_KEY_PATTERN.test(text);
}

/** Whether a key can authenticate at `nowMs`: not revoked, not expired. */
export function apiKeyUsable(key: ApiKey, nowMs: number): boolean {
  if (key.revoked_at !== null) return false;
  return key.expires_at === null || Date.parse(key.expires_at) > nowMs;
}
