/**
 * The embedded mode (`npm start` defaults: SQLite, no REDIS_URL or NATS_URL) killed with
 * `kill -9` in the middle of concurrent writes and redirects (issue #11, fault suite). After a
 * restart on the same file, every acknowledged mapping is there and every acknowledged change
 * has exactly one event in the embedded log (`event_log`, which is the outbox) and, once the
 * event store has caught up, in `event_store`. Clicks are buffered for `CLICK_FLUSH_INTERVAL_MS`:
 * at most the clicks of the last interval before the kill may be lost, never older ones, and
 * no click is counted that was not made. And two processes on one file under the same load
 * while another process holds SQLite's write lock until requests are refused, twice: requests
 * answer a success or 503 `{detail}`, no process exits, every acknowledged change has exactly one
 * event in the log and the store (a 503 none: SQLite's answer is never lost), every acknowledged
 * execution ends once, and after a graceful stop every acknowledged click is stored.
 */
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { sqlite, type TestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { clickAccount, settle, sqliteState } from './checker.js';
import { signUp } from './cluster.js';
import { Load, type OpRecord } from './load.js';
import { malformedErrors, unexpectedAnswers } from './scenario.js';
import { recoveryMs, report } from './summary.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const UNLIMITED = '1000000000';
/** The documented default. */
const FLUSH_INTERVAL_MS = 500;
/**
 * A flush is due every interval and then takes a write of its own (a group commit, under load):
 * a click acknowledged more than this before the kill must have been written.
 */
const WRITTEN_WITHIN_MS = FLUSH_INTERVAL_MS + 250;

/** `npm start`'s defaults but for the file and rate limits high enough for the load. */
function embeddedEnv(databaseUrl: string): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    RATE_LIMIT_AUTH_LIMIT: UNLIMITED,
    RATE_LIMIT_WRITES_LIMIT: UNLIMITED,
    RATE_LIMIT_REDIRECTS_LIMIT: UNLIMITED,
    RATE_LIMIT_DEFAULT_LIMIT: UNLIMITED,
  };
}

/** Each mapping's stored clicks: the folded count plus the deltas not folded yet. */
function storedClicks(file: string): Map<string, number> {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    const rows = db
      .prepare(
        `SELECT m.code AS code, m.click_count + COALESCE(SUM(d.delta), 0) AS clicks
           FROM url_mappings m LEFT JOIN url_click_deltas d ON d.url_id = m.id GROUP BY m.id`,
      )
      .all() as { code: string; clicks: number }[];
    return new Map(rows.map((r) => [r.code, Number(r.clicks)]));
  } finally {
    db.close();
  }
}

/**
 * What the file holds after the restart: the events in the embedded log at once, then in the
 * event store once it has caught up (its consumer waits for the killed process's lease), and the clicks.
 */
async function survived(file: string, records: readonly OpRecord[], killedAt: number) {
  const log = await settle(records, async () => sqliteState(file, 'event_log'), { timeoutMs: 5000, quietMs: 0 });
  const store = await settle(records, async () => sqliteState(file, 'event_store'), { timeoutMs: 20_000 });
  const clicks = clickAccount(records, storedClicks(file), { killedAt, writtenWithinMs: WRITTEN_WITHIN_MS });
  const verdict = {
    ...log.verdict,
    lost: [...log.verdict.lost, ...store.verdict.lost.map((l) => `event store: ${l}`)],
    duplicated: [...log.verdict.duplicated, ...store.verdict.duplicated.map((l) => `event store: ${l}`)],
    unexpected: [...log.verdict.unexpected, ...clicks.phantom],
  };
  return { verdict, clicks, caughtUpMs: store.caughtUpMs };
}

describe('the embedded mode killed mid-load', () => {
  let database: TestDatabase | undefined;
  const servers: ServerProcess[] = [];
  afterAll(async () => {
    for (const s of servers) await s.stop('SIGKILL');
    await database?.drop();
  });

  it('f. kill -9 under load: acknowledged mappings and their events survive; clicks lost at most one flush interval', async () => {
    database = await sqlite.create();
    const file = database.databaseUrl.slice('sqlite:'.length);
    const env = embeddedEnv(database.databaseUrl);
    const server = await startServer(env);
    servers.push(server);
    const load = new Load({
      targets: [server.url],
      concurrency: 32,
      mix: { create: 3, update: 1, delete: 1, redirect: 6 },
      codePrefix: 'f',
      requestTimeoutMs: 10_000,
    }).start();
    await sleep(4000);
    const killedAt = Date.now();
    expect(await server.stop('SIGKILL')).toBeNull();
    await load.stop();

    const restarted = await startServer(env);
    servers.push(restarted);
    const clearedAt = Date.now();
    const { verdict, clicks, caughtUpMs } = await survived(file, load.records, killedAt);
    report(
      {
        scenario: 'f. embedded SQLite killed',
        load: `${load.records.length} requests (create/update/delete/redirect 3:1:1:6), concurrency 32, one process`,
        fault: 'kill -9 after 4 s of load; restarted on the same file',
      },
      load.records,
      verdict,
      { recoveryMs: clearedAt - killedAt, eventsCaughtUpMs: caughtUpMs },
      {
        clicksAcknowledged: clicks.acked,
        clicksLost: clicks.lost,
        oldestLostClickAgeMs: clicks.oldestLostAgeMs,
        clickFlushIntervalMs: FLUSH_INTERVAL_MS,
        clicksLostOlderThanAllowed: clicks.tooOld.length,
      },
    );

    // Only requests the kill cut off went unanswered; every other answer is a success.
    const answered = load.records.filter((r) => r.status !== null);
    expect(answered.filter((r) => r.status! >= 400).map((r) => `${r.kind} ${r.status} ${r.error}`)).toEqual([]);
    expect(malformedErrors(load.records)).toEqual([]);
    expect.soft(verdict.lost, 'acknowledged mappings or events lost').toEqual([]);
    expect.soft(verdict.duplicated, 'changes recorded twice').toEqual([]);
    expect.soft(verdict.unexpected, 'refused changes that happened, clicks never made').toEqual([]);
    expect.soft(clicks.tooOld, `clicks acknowledged over ${WRITTEN_WITHIN_MS} ms before the kill, lost`).toEqual([]);
    expect(restarted.child.exitCode).toBeNull();
  }, 90_000);
});

describe('the embedded mode in two processes, the database locked by another under load', () => {
  let database: TestDatabase | undefined;
  const servers: ServerProcess[] = [];
  let load: Load | undefined;
  afterAll(async () => {
    await load?.stop();
    for (const s of servers) await s.stop('SIGKILL');
    await database?.drop();
  });

  it('g. the write lock held until requests are refused, twice: 503s, no exits, nothing lost or doubled', async () => {
    database = await sqlite.create();
    const file = database.databaseUrl.slice('sqlite:'.length);
    const env = { ...embeddedEnv(database.databaseUrl), EVENT_LEASE_MS: '2000' };
    // One after the other: the first makes the schema.
    for (let i = 0; i < 2; i++) servers.push(await startServer(env));
    const targets = servers.map((s) => s.url);
    const users = await Promise.all([0, 1, 2, 3].map((i) => signUp(targets[i % 2]!, `lockedg${i}`)));
    load = new Load({
      targets,
      concurrency: 32,
      mix: { create: 3, update: 1, delete: 1, redirect: 6 },
      executeEveryMs: 100,
      codePrefix: 'g',
      sessions: users.map((u) => u.cookie),
      requestTimeoutMs: 30_000,
    }).start();
    await sleep(2000);
    const holds: number[] = [];
    let lockedAt = 0;
    for (let round = 0; round < 2; round++) {
      // Another process (a backup, an import, a third instance) takes the write lock and keeps it.
      const holder = new Database(file);
      holder.exec('BEGIN IMMEDIATE');
      lockedAt ||= Date.now();
      const since = Date.now();
      // Until it refuses a request: a write waits for the lock a busy timeout (5 s), and a
      // group commit tries once more.
      await eventually(() => expect(load!.records.some((r) => r.status === 503 && r.startedAt >= since)).toBe(true), {
        timeoutMs: 60_000,
        intervalMs: 100,
      });
      holder.exec('ROLLBACK');
      holder.close();
      holds.push(Date.now() - since);
      await sleep(2500);
    }
    const clearedAt = Date.now() - 2500;
    await load.stop();
    // A graceful stop writes the clicks each process still holds.
    for (const server of servers) expect(server.child.exitCode, server.output()).toBeNull();
    for (const server of servers) expect(await server.stop()).toBe(0);

    // Executions still queued at the stop end, and the event store catches up, while a process
    // runs: one, restarted on the file.
    servers.push(await startServer(env));
    const log = await settle(load.records, async () => sqliteState(file, 'event_log'), {
      timeoutMs: 30_000,
      quietMs: 0,
    });
    const store = await settle(load.records, async () => sqliteState(file, 'event_store'), { timeoutMs: 30_000 });
    const clicks = clickAccount(load.records, storedClicks(file));
    const verdict = {
      ...store.verdict,
      lost: [...log.verdict.lost, ...store.verdict.lost.map((l) => `event store: ${l}`)],
      duplicated: [...log.verdict.duplicated, ...store.verdict.duplicated.map((l) => `event store: ${l}`)],
      unexpected: [...log.verdict.unexpected, ...clicks.phantom],
    };
    const refused = load.records.filter((r) => r.status === 503).length;
    report(
      {
        scenario: 'g. embedded SQLite, two processes, write lock held by another',
        load: `${load.records.length} requests (create/update/delete/redirect 3:1:1:6) and executions, concurrency 32, two processes on one file`,
        fault: `another process held the write lock until a request was refused: ${holds.map((ms) => `${(ms / 1000).toFixed(1)} s`).join(' and ')} (busy timeout 5 s)`,
      },
      load.records,
      verdict,
      { recoveryMs: recoveryMs(load.records, clearedAt, targets.length), eventsCaughtUpMs: store.caughtUpMs },
      {
        answered503: refused,
        recoveryAfterFirstLockMs: recoveryMs(load.records, lockedAt, targets.length),
        clicksAcknowledged: clicks.acked,
        clicksLost: clicks.lost,
      },
    );

    expect.soft(refused, 'requests refused while the lock was held past the busy timeout').toBeGreaterThan(0);
    // In-flight requests answer 503 {detail} or succeed; a per-user cap may refuse an execution (429).
    const kinds = ['create', 'update', 'delete', 'execute', 'redirect', 'session'];
    expect
      .soft(unexpectedAnswers(load.records, { 503: kinds, 429: ['execute'] }), 'answers other than a success or 503')
      .toEqual([]);
    expect.soft(malformedErrors(load.records), 'error answers that are not {detail}').toEqual([]);
    expect.soft(verdict.lost, 'acknowledged changes or events lost').toEqual([]);
    expect.soft(verdict.duplicated, 'changes recorded twice').toEqual([]);
    expect.soft(verdict.unexpected, 'refused changes that happened, clicks never made').toEqual([]);
    expect.soft(verdict.stuck, 'acknowledged executions without one final state').toEqual([]);
    expect.soft(clicks.lost, 'acknowledged clicks not stored after a graceful stop').toBe(0);
    expect.soft(store.caughtUpMs, 'every acknowledged change reached the event store').not.toBeNull();
  }, 180_000);
});
