import type { Generated } from 'kysely';

/** The tables as Kysely sees them. Timestamps cross this boundary as canonical RFC 3339 strings. */
export interface UrlMappingsTable {
  id: Generated<number>;
  code: string;
  url: string;
  created_at: string;
  click_count: number;
}

/**
 * Clicks written but not yet folded into `url_mappings.click_count`: one narrow row per mapping.
 * A mapping's count is its `click_count` plus the `delta` of the row with its id as `url_id`.
 */
export interface UrlClickDeltasTable {
  url_id: number;
  delta: number;
}

export interface UsersTable {
  id: Generated<number>;
  username: string;
  /** Lower-case. */
  email: string;
  role: 'user' | 'admin';
  password_hash: string;
  created_at: string;
  updated_at: string;
}

/** Runtime settings changed by administrators; absent keys follow their configured defaults. */
export interface SettingsTable {
  key: string;
  /** JSON text. */
  value: string;
  updated_at: string;
}

export interface DatabaseSchema {
  url_mappings: UrlMappingsTable;
  url_click_deltas: UrlClickDeltasTable;
  users: UsersTable;
  settings: SettingsTable;
}
