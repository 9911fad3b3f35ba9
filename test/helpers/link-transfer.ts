import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { openDatabase } from '../../src/adapters/storage/database.js';
import type { DatabaseSchema } from '../../src/adapters/storage/schema.js';
import type { ImportReport, LinkRecord } from '../../src/domain/link-transfer.js';
import { testConfig } from './backends.js';
import type { Injector } from './http.js';

/** `POST /api/v1/links/import` with `body` as CSV (a string) or JSON (anything else). */
export function importLinks(app: Injector, headers: Record<string, string>, body: unknown, query = '') {
  const csv = typeof body === 'string';
  return app.inject({
    method: 'POST',
    url: `/api/v1/links/import${query}`,
    headers: { ...headers, 'content-type': csv ? 'text/csv' : 'application/json' },
    payload: csv ? body : JSON.stringify(body),
  });
}

/** The report of an import that must answer 200. */
export async function importReport(
  app: Injector,
  headers: Record<string, string>,
  body: unknown,
  query = '',
): Promise<ImportReport> {
  const response = await importLinks(app, headers, body, query);
  if (response.statusCode !== 200) throw new Error(`import answered ${response.statusCode}: ${response.body}`);
  return response.json<ImportReport>();
}

/** `GET /api/v1/links/export` as JSON: the links. */
export async function exportJson(app: Injector, headers: Record<string, string>): Promise<LinkRecord[]> {
  const response = await app.inject({ method: 'GET', url: '/api/v1/links/export?format=json', headers });
  if (response.statusCode !== 200) throw new Error(`export answered ${response.statusCode}: ${response.body}`);
  return response.json<LinkRecord[]>();
}

/** A stored mapping as the database holds it. */
export interface StoredLink {
  readonly code: string;
  readonly url: string;
  readonly created_at: string;
  readonly click_count: number;
  readonly owner: number | null;
}

/** Runs `work` on its own connection to the database at `databaseUrl`, then closes it. */
export async function withDb<T>(databaseUrl: string, work: (db: Kysely<DatabaseSchema>) => Promise<T>): Promise<T> {
  const database = openDatabase(testConfig(databaseUrl).database);
  try {
    return await work(database.db);
  } finally {
    await database.close();
  }
}

/** The stored mappings whose code starts with `prefix`, by code. */
export const storedLinks = (databaseUrl: string, prefix: string): Promise<Map<string, StoredLink>> =>
  withDb(databaseUrl, async (db) => {
    const rows = await db
      .selectFrom('url_mappings')
      .select(['code', 'url', 'created_at', 'click_count', 'owner_id as owner'])
      .where(sql<boolean>`substr(code, 1, ${prefix.length}) = ${prefix}`)
      .execute();
    return new Map(
      rows.map((row) => [
        row.code,
        { ...row, click_count: Number(row.click_count), owner: row.owner === null ? null : Number(row.owner) },
      ]),
    );
  });

/** The payload of each `url.created` in the embedded log, by code. */
export const createdPayloads = (databaseUrl: string): Promise<Map<string, Record<string, unknown>>> =>
  withDb(databaseUrl, async (db) => {
    const rows = await db.selectFrom('event_log').select('envelope').where('topic', '=', 'url_events').execute();
    const payloads = new Map<string, Record<string, unknown>>();
    for (const { envelope } of rows) {
      const { event_type, payload } = JSON.parse(envelope) as { event_type: string; payload: Record<string, unknown> };
      if (event_type === 'url.created') payloads.set(payload.code as string, payload);
    }
    return payloads;
  });
