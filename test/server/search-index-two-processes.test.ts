import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/adapters/storage/database.js';
import { sqlite, testConfig, type TestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { CENSUS_ENV, shortenLoad } from '../helpers/outbox-census.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { holdWriteLock } from '../helpers/storage.js';

/**
 * SQLite's search index (migration 0061) is filled in the background by every serving process:
 * each adds the mappings beyond `indexed_up_to` in transactions of its own. Two processes on one
 * file, creating, retargeting and deleting at once, one of them killed mid-load, and another
 * process holding the write lock past the busy timeout mid-load, must leave an index that holds
 * every mapping exactly once with its current code and URL. FTS5's
 * `integrity-check` with rank 1 compares the index with the table row by row; `indexed_up_to`
 * reaching the last id shows the index caught up.
 */

type Reader = ReturnType<typeof openDatabase>;

async function indexState(reader: Reader): Promise<{ indexedUpTo: number; lastId: number }> {
  const { rows } = await sql<{ indexed_up_to: number; last_id: number }>`
    SELECT (SELECT indexed_up_to FROM url_mappings_search_state) AS indexed_up_to,
           (SELECT COALESCE(MAX(id), 0) FROM url_mappings) AS last_id`.execute(reader.db);
  return { indexedUpTo: Number(rows[0]!.indexed_up_to), lastId: Number(rows[0]!.last_id) };
}

/** Waits until the index has caught up with the last mapping, then checks it against the table. */
async function expectIndexCaughtUp(reader: Reader): Promise<void> {
  await eventually(
    async () => {
      const { indexedUpTo, lastId } = await indexState(reader);
      if (indexedUpTo < lastId) throw new Error(`indexed up to ${indexedUpTo} of ${lastId}`);
    },
    { timeoutMs: 20_000, intervalMs: 200 },
  );
  await expectIndexMatchesTable(reader);
}

/** Throws unless the index holds exactly the rows of `url_mappings` up to `indexed_up_to`. */
async function expectIndexMatchesTable(reader: Reader): Promise<void> {
  const { indexedUpTo, lastId } = await indexState(reader);
  expect(indexedUpTo).toBe(lastId);
  await sql`INSERT INTO url_mappings_search (url_mappings_search, rank) VALUES ('integrity-check', 1)`.execute(
    reader.db,
  );
}

const json = async <T>(response: Response) => (await response.json()) as T;

/** The codes `GET /urls?q=` finds for `q` (every page). */
async function found(url: string, q: string): Promise<string[]> {
  const codes: string[] = [];
  let next: string | undefined = `${url}/urls?limit=100&q=${encodeURIComponent(q)}`;
  while (next) {
    const response: Response = await fetch(next);
    expect(response.status).toBe(200);
    codes.push(...(await json<{ code: string }[]>(response)).map((m) => m.code));
    next = /<([^>]+)>;\s*rel="next"/.exec(response.headers.get('link') ?? '')?.[1];
    if (next && !next.startsWith('http')) next = `${url}${next}`;
  }
  return codes;
}

/** Retargets every 3rd and deletes every 7th of `codes`, 8 at a time, alternating between `targets`. */
async function churn(targets: readonly string[], codes: readonly string[]) {
  const retargeted = new Set<string>();
  const deleted = new Set<string>();
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < codes.length; i = next++) {
      const code = codes[i]!;
      const target = targets[i % targets.length]!;
      if (i % 7 === 0) {
        const response = await fetch(`${target}/${code}`, { method: 'DELETE' });
        expect(response.status).toBe(204);
        deleted.add(code);
      } else if (i % 3 === 0) {
        const response = await fetch(`${target}/${code}`, {
          method: 'PATCH',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ url: `https://example.org/moved/${code}` }),
        });
        await response.arrayBuffer();
        expect(response.status).toBe(200);
        retargeted.add(code);
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return { retargeted, deleted };
}

describe('the SQLite search index, filled by two processes writing to one file', () => {
  let database: TestDatabase;
  let reader: Reader;
  const servers: ServerProcess[] = [];
  const env = () => ({ ...CENSUS_ENV, DATABASE_URL: database.databaseUrl, LOG_LEVEL: 'info' });

  beforeAll(async () => {
    database = await sqlite.create();
    servers.push(await startServer(env()), await startServer(env()));
    reader = openDatabase(testConfig(database.databaseUrl).database);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop('SIGKILL')));
    await reader?.close();
    await database?.drop();
  });

  it('holds every mapping once, with its current code and URL, after concurrent creates, retargets and deletes', async () => {
    const targets = servers.map((server) => server.url);
    // Mappings created and indexed at once, while earlier ones are retargeted and deleted.
    const first = await shortenLoad(targets, 600, 16);
    // A backlog of several indexing chunks at once (as after an import), which both processes' indexers race through.
    await sql`
      WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
      INSERT INTO url_mappings (code, url, created_at, click_count)
      SELECT 'backlog' || i, 'https://example.net/backlog/' || i, (SELECT MIN(created_at) FROM url_mappings), 0
      FROM n`.execute(reader.db);
    const [second, { retargeted, deleted }] = await Promise.all([
      shortenLoad(targets, 2000, 24),
      churn(targets, first.acknowledged),
    ]);
    expect([...first.refused.entries(), ...second.refused.entries()]).toEqual([]);
    const acknowledged = [...first.acknowledged, ...second.acknowledged];

    await expectIndexCaughtUp(reader);

    const sample = acknowledged.filter((_, i) => i % 50 === 0);
    for (const code of sample) {
      const hits = await found(servers[0]!.url, code);
      expect(hits, code).toEqual(deleted.has(code) ? [] : [code]);
      if (retargeted.has(code)) {
        expect(await found(servers[1]!.url, `example.org/moved/${code}`)).toEqual([code]);
        expect(await found(servers[1]!.url, `example.com/${code}`)).toEqual([]);
      }
    }
  }, 120_000);

  it('stays whole when a process is killed mid-load, and the other catches it up', async () => {
    const load = shortenLoad(
      servers.map((server) => server.url),
      3000,
      32,
    );
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await servers[0]!.stop('SIGKILL');
    const result = await load;
    // Requests to the killed process fail; none of those was acknowledged.
    expect(result.acknowledged.length).toBeGreaterThan(0);

    await expectIndexCaughtUp(reader);

    // Restarted on the same file, the killed process serves searches from the same index.
    servers[0] = await startServer(env());
    const { rows } = await sql<{ code: string }>`SELECT code FROM url_mappings`.execute(reader.db);
    const stored = new Set(rows.map((row) => row.code));
    const missing = result.acknowledged.filter((code) => !stored.has(code));
    expect(missing).toEqual([]);
    for (const code of result.acknowledged.filter((_, i) => i % 100 === 0))
      expect(await found(servers[0].url, code), code).toEqual([code]);
  }, 120_000);

  it('stays whole when another process holds the write lock past the busy timeout mid-load', async () => {
    const targets = servers.map((server) => server.url);
    const load = shortenLoad(targets, 3000, 32);
    await new Promise((resolve) => setTimeout(resolve, 500));
    // Both processes' creates and indexing chunks wait for it, and are refused after the busy timeout.
    const lock = holdWriteLock(database.databaseUrl);
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    lock.release();
    const result = await load;
    console.log(
      `search index, the write lock held 6 s: ${result.acknowledged.length} created, refused ${JSON.stringify(Object.fromEntries(result.refused))}`,
    );
    expect(result.acknowledged.length).toBeGreaterThan(0);
    // A create that waited past the busy timeout is refused (a group commit may try once more and
    // get through after the 6 s); nothing else.
    expect([...result.refused.keys()].filter((status) => status !== '503')).toEqual([]);

    await expectIndexCaughtUp(reader);
    const { rows } = await sql<{ code: string }>`SELECT code FROM url_mappings`.execute(reader.db);
    const stored = new Set(rows.map((row) => row.code));
    expect(result.acknowledged.filter((code) => !stored.has(code))).toEqual([]);
    for (const [n, code] of result.acknowledged.filter((_, i) => i % 100 === 0).entries())
      expect(await found(targets[n % 2]!, code), code).toEqual([code]);
  }, 120_000);
});
