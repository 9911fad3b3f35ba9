/**
 * Issue 15: visits are buffered and written with the click flush, so a `kill -9` loses at most
 * one flush interval of them, as for clicks (test/faults/embedded.test.ts, scenario f). The built
 * service in its own process on each backend, redirected over several connections at once, is
 * killed mid-load and restarted on the same database: every stored visit is one redirect of its
 * link that was answered 302 (its time within that request's, none twice), and every redirect
 * answered more than one flush interval (plus a margin) before the kill has its visit. The kill
 * falls a set time after a flush is seen, so that a service flushing less often than it says
 * fails here whatever the phase of its timer. Once with the clicks' interval, once with a longer
 * one of the visits' own (VISIT_FLUSH_INTERVAL_MS), whose flushes must come that far apart. A
 * flush writes a journal row, merged into segments every few seconds by any instance: the killed
 * server's rows are merged by the restarted one, which the test waits for.
 */
import type { Kysely } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import type { DatabaseSchema } from '../../src/adapters/storage/schema.js';
import { BACKENDS, type TestDatabase, testConfig } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, fetchShorten, newMapping } from '../helpers/http.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { USER_AGENTS, visitRows } from '../helpers/visits.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The documented default CLICK_FLUSH_INTERVAL_MS, set explicitly. */
const CLICK_FLUSH_INTERVAL_MS = 500;
const LINKS = 4;
const CONNECTIONS = 16;

/**
 * How often visits are flushed in a case: with the clicks (VISIT_FLUSH_INTERVAL_MS not set), or
 * every `flushMs` of their own, longer than the clicks'.
 */
const CASES = [
  { name: 'with the clicks', flushMs: CLICK_FLUSH_INTERVAL_MS, env: {} },
  { name: 'VISIT_FLUSH_INTERVAL_MS=2000', flushMs: 2000, env: { VISIT_FLUSH_INTERVAL_MS: '2000' } },
] as const;

/** The times of a case, from its flush interval. */
function timing(flushMs: number) {
  return {
    /**
     * A flush is due every interval and then takes a write of its own (under load): a redirect
     * answered more than this before the kill must have its visit written. The click test's margin.
     */
    writtenWithinMs: flushMs + 250,
    /**
     * The kill comes this long after a flush is seen committed: past `writtenWithinMs`, so a service
     * that let more than an interval go by without a flush loses visits older than allowed; and
     * 300 ms after the next flush is due, for it to be written.
     */
    killAfterFlushMs: flushMs + 300,
    /** Load before the kill: several flushes. */
    loadMs: 1000 + 2 * flushMs,
  };
}

/** One redirect sent: when (Unix ms, the clock visits are stamped by) and what came back. */
interface Redirect {
  readonly code: string;
  readonly sentAt: number;
  answeredAt: number;
  status: number | null;
}

/**
 * Stored visit times of one link matched to its redirects answered 302: each visit to a distinct
 * redirect whose request was under way at the visit's time (earliest-ending first, which matches
 * as many as can be). What is left over on either side: visits no acknowledged redirect made, and
 * acknowledged redirects without a visit.
 */
function matchVisits(visitTimes: readonly number[], redirects: readonly Redirect[]) {
  const open = redirects.filter((r) => r.status === 302).sort((x, y) => x.answeredAt - y.answeredAt);
  const unmatchedVisits: number[] = [];
  for (const at of [...visitTimes].sort((x, y) => x - y)) {
    const i = open.findIndex((r) => r.sentAt <= at && at <= r.answeredAt);
    if (i === -1) unmatchedVisits.push(at);
    else open.splice(i, 1);
  }
  return { unmatchedVisits, unmatchedRedirects: open };
}

/** Resolves once a visit flush not yet seen has committed (a newer `visit_batches` row). */
async function nextFlush(db: Kysely<DatabaseSchema>): Promise<void> {
  const newest = async () => {
    const row = await db
      .selectFrom('visit_batches')
      .select((eb) => eb.fn.max('written_at_ms').as('at'))
      .executeTakeFirst();
    return row?.at == null ? 0 : Number(row.at);
  };
  const seen = await newest();
  await eventually(async () => (await newest()) > seen, { intervalMs: 5, timeoutMs: 5000 });
}

/** When each flush began: the first batch of each run of `visit_batches` rows written within 200 ms of the one before. */
async function flushTimes(db: Kysely<DatabaseSchema>): Promise<number[]> {
  const rows = await db.selectFrom('visit_batches').select('written_at_ms').orderBy('written_at_ms').execute();
  const times = rows.map((r) => Number(r.written_at_ms));
  return times.filter((at, i) => i === 0 || at - times[i - 1]! > 200);
}

describe.each(BACKENDS)('visits across a kill -9 of the server process on $name', (backend) => {
  let database: TestDatabase | undefined;
  let reader: Database | undefined;
  const servers: ServerProcess[] = [];
  /** The last case's servers stopped, then its reader and database gone (before the next case, and at the end). */
  const cleanUp = async () => {
    for (const server of servers.splice(0)) await server.stop('SIGKILL');
    await reader?.close();
    await database?.drop();
    reader = database = undefined;
  };
  afterAll(cleanUp);

  it.skipIf(!backend.available).each(CASES)(
    'flushing visits $name, loses at most the visits of the last flush interval, and stores none twice or unanswered',
    async ({ flushMs, env: flushEnv }) => {
      const { writtenWithinMs, killAfterFlushMs, loadMs } = timing(flushMs);
      await cleanUp();
      database = await backend.create();
      const env = {
        DATABASE_URL: database.databaseUrl,
        CLICK_FLUSH_INTERVAL_MS: String(CLICK_FLUSH_INTERVAL_MS),
        RATE_LIMIT_ENABLED: 'false',
        ...flushEnv,
      };
      const server = await startServer(env);
      servers.push(server);
      reader = openDatabase(testConfig(database.databaseUrl).database);
      const db = reader.db;
      const nextCode = codeMaker(backend.name === 'sqlite' ? 'vks' : 'vkp');
      const codes: string[] = [];
      for (let i = 0; i < LINKS; i++) {
        const body = newMapping(nextCode);
        const created = await fetchShorten(server.url, body);
        expect(created.status).toBe(201);
        codes.push(body.code);
      }

      const redirects: Redirect[] = [];
      let killed = false;
      const connection = async (n: number) => {
        for (let i = 0; !killed; i++) {
          const agent = USER_AGENTS[(n + i) % USER_AGENTS.length];
          const redirect: Redirect = { code: codes[(n + i) % LINKS]!, sentAt: Date.now(), answeredAt: 0, status: null };
          redirects.push(redirect);
          try {
            const response = await fetch(`${server.url}/${redirect.code}`, {
              headers: agent === undefined ? {} : { 'user-agent': agent },
              redirect: 'manual',
            });
            redirect.answeredAt = Date.now();
            redirect.status = response.status;
            await response.arrayBuffer();
          } catch {
            // The connection died with the process: not acknowledged.
          }
        }
      };
      const load = Promise.all(Array.from({ length: CONNECTIONS }, (_, n) => connection(n)));
      let killedAt: number;
      try {
        await sleep(loadMs);
        await nextFlush(db);
        await sleep(killAfterFlushMs);
      } finally {
        // The connections stop sending whatever happened (the requests under way are cut off).
        killedAt = Date.now();
        killed = true;
      }
      expect(await server.stop('SIGKILL')).toBeNull();
      await load;

      const restarted = await startServer(env);
      servers.push(restarted);
      // The killed server's journal rows, merged by the restarted server (its fold task, every 5 s).
      await eventually(
        async () => {
          const left = await db.selectFrom('visit_journal').select('id').execute();
          expect(left, 'journal rows not merged by the restarted server').toEqual([]);
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      const verdict = { acknowledged: 0, stored: 0, lost: 0, oldestLostAgeMs: 0 };
      const unanswered: string[] = [];
      const tooOld: string[] = [];
      for (const code of codes) {
        const mine = redirects.filter((r) => r.code === code);
        const times = (await visitRows(db, code)).map((v) => Number(v.visited_at_ms));
        const { unmatchedVisits, unmatchedRedirects } = matchVisits(times, mine);
        verdict.acknowledged += mine.filter((r) => r.status === 302).length;
        verdict.stored += times.length;
        verdict.lost += unmatchedRedirects.length;
        for (const at of unmatchedVisits) unanswered.push(`${code}: a visit at ${at} no acknowledged redirect made`);
        for (const r of unmatchedRedirects) {
          const age = killedAt - r.answeredAt;
          verdict.oldestLostAgeMs = Math.max(verdict.oldestLostAgeMs, age);
          if (age > writtenWithinMs) tooOld.push(`${code}: answered ${age} ms before the kill, no visit`);
        }
      }
      console.log(`visits across kill -9 on ${backend.name}, every ${flushMs} ms: ${JSON.stringify(verdict)}`);

      expect(redirects.filter((r) => r.status !== null && r.status !== 302)).toEqual([]);
      // Enough load for several flushes before the kill.
      expect(verdict.acknowledged).toBeGreaterThan(500);
      expect(verdict.stored).toBeGreaterThan(0);
      expect.soft(unanswered, 'visits stored that no acknowledged redirect made (or made twice)').toEqual([]);
      expect.soft(tooOld, `redirects acknowledged over ${writtenWithinMs} ms before the kill, visit lost`).toEqual([]);
      if (flushMs > CLICK_FLUSH_INTERVAL_MS) {
        // Visits' own interval, not the clicks' shorter one: their flushes came that far apart.
        // The times are the writes' ends, each after its flush's preparation and commit: on a
        // loaded machine one write late by 400 ms makes its gap to the next 1,600 ms (seen in CI)
        // on a 2,000 ms timer. So each gap is more than twice the clicks' interval (flushes on
        // the clicks' timer would be 500 ms apart), and on average they are the visits' own.
        const flushes = await flushTimes(db);
        expect(flushes.length).toBeGreaterThan(1);
        const gaps = flushes.slice(1).map((at, i) => at - flushes[i]!);
        const said = `gaps between flushes: ${gaps.join(', ')} ms`;
        expect(Math.min(...gaps), said).toBeGreaterThan(2 * CLICK_FLUSH_INTERVAL_MS);
        expect(gaps.reduce((a, b) => a + b, 0) / gaps.length, said).toBeGreaterThan(flushMs * 0.9);
      }
      expect(restarted.child.exitCode).toBeNull();
    },
    60_000,
  );
});
