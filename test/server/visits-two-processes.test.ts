import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import { BACKENDS, type TestDatabase, testConfig } from '../helpers/backends.js';
import { codeMaker, fetchShorten, newMapping } from '../helpers/http.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { storedClicks } from '../helpers/stored-clicks.js';
import { REFERRERS, rollupsAndRecount, USER_AGENTS } from '../helpers/visits.js';

/**
 * Two processes of the built service on one database, redirecting the same link concurrently:
 * every redirect answered 302 is one visit row (none lost, none doubled, after both stop
 * gracefully), the rollups equal a recount of the rows, and the click count is the same number.
 */
describe.each(BACKENDS)('visits from two processes on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  let database: TestDatabase;
  let servers: ServerProcess[] = [];

  beforeAll(async () => {
    if (!backend.available) return;
    database = await backend.create();
    const env = {
      DATABASE_URL: database.databaseUrl,
      RATE_LIMIT_ENABLED: 'false',
      VISIT_COUNTRY_HEADER: 'CF-IPCountry',
    };
    servers.push(await startServer(env));
    servers.push(await startServer(env));
  }, 60_000);
  afterAll(async () => {
    for (const server of servers) await server.stop();
    servers = [];
    await database?.drop();
  });

  test('every acknowledged redirect arrives once as a visit; rollups equal the recount', async () => {
    const body = newMapping(codeMaker('two'));
    const created = await fetchShorten(servers[0]!.url, body);
    expect(created.status).toBe(201);
    let acknowledged = 0;
    const client = async (server: ServerProcess, n: number) => {
      for (let i = 0; i < 150; i++) {
        const agent = USER_AGENTS[(i + n) % USER_AGENTS.length];
        const referer = REFERRERS[i % REFERRERS.length];
        const headers: Record<string, string> = { 'cf-ipcountry': ['DE', 'US', 'BR'][i % 3]! };
        if (agent) headers['user-agent'] = agent;
        if (referer) headers.referer = referer;
        const response = await fetch(`${server.url}/${body.code}`, { headers, redirect: 'manual' });
        await response.arrayBuffer();
        if (response.status === 302) acknowledged++;
      }
    };
    await Promise.all(servers.flatMap((server, s) => [0, 1, 2, 3].map((n) => client(server, s * 4 + n))));
    expect(acknowledged).toBe(2 * 4 * 150);
    // A graceful stop writes what each still holds.
    for (const server of servers) expect(await server.stop()).toBe(0);

    let db: Database | undefined;
    try {
      db = openDatabase(testConfig(database.databaseUrl).database);
      const { id } = await db.db
        .selectFrom('url_mappings')
        .select('id')
        .where('code', '=', body.code)
        .executeTakeFirstOrThrow();
      const { count, recount, stored, visitors } = await rollupsAndRecount(db.db, id);
      expect(count).toBe(acknowledged);
      expect(stored).toEqual(recount);
      // One address, six User-Agents (fetch sends its own when none is set): six visitors a day.
      expect(visitors / recount.length).toBeGreaterThanOrEqual(5);
      expect(visitors / recount.length).toBeLessThanOrEqual(6);
      expect(await storedClicks(db.db, { id })).toBe(acknowledged);
      const batches = await db.db.selectFrom('visit_batches').select('id').execute();
      expect(batches.length).toBeGreaterThanOrEqual(2);
    } finally {
      await db?.db.destroy();
    }
  }, 120_000);
});
