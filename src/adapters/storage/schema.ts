import type { Generated } from 'kysely';

/** The tables as Kysely sees them. Timestamps cross this boundary as canonical RFC 3339 strings. */
export interface UrlMappingsTable {
  id: Generated<number>;
  code: string;
  url: string;
  created_at: string;
  click_count: number;
}

export interface DatabaseSchema {
  url_mappings: UrlMappingsTable;
}
