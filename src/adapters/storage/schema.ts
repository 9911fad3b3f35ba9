import type { Generated } from 'kysely';

/** The tables as Kysely sees them. Timestamps cross this boundary as canonical RFC 3339 strings. */
export interface UrlMappingsTable {
  id: Generated<number>;
  code: string;
  url: string;
  created_at: string;
  click_count: number;
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
  users: UsersTable;
  settings: SettingsTable;
}
