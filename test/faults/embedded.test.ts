/**
 * The embedded mode (`npm start` defaults: SQLite, no REDIS_URL or NATS_URL) killed with
 * `kill -9` in the middle of concurrent writes and redirects (issue #11, fault suite). After a
 * restart on the same file, every acknowledged mapping is there and every acknowledged change
 * has exactly one event in the embedded log (`event_log`, which is the outbox) and, once the
 * event store has caught up, in `event_store`. Clicks are buffered for `CLICK_FLUSH_INTERVAL_MS`:
 * at most the clicks of the last interval before the kill may be lost, never older ones, and
 * no click is counted that was not made.
 */
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { sqlite, type TestDatabase } from '../helpers/backends.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { settle, sqliteState } from './checker.js';
import { Load, type OpRecord } from './load.js';
import { malformedErrors } from './scenario.js';
import { report } from './summary.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const UNLIMITED = '1000000000';
/** The documented default. */
const FLUSH_INTERVAL_MS = 500;
/**
 * A flush is due every interval and then takes a write of its own (a group commit, under load):
 * a click acknowledged more than this before the kill must have been written.
 */
const WRITTEN_WITHIN_MS = FLUSH_INTERVAL_MS + 250;

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

/** Clicks acknowledged (302) against clicks stored, per mapping never deleted. */
function clickAccount(records: readonly OpRecord[], stored: Map<string, number>, killedAt: number) {
  const deleted = new Set(records.filter((r) => r.kind === 'delete').map((r) => r.code));
  const perCode = new Map<string, { tried: number; acked: number; ackedEarly: number; lastAck: number[] }>();
  for (const r of records) {
    if (r.kind !== 'redirect' || deleted.has(r.code)) continue;
    const entry = perCode.get(r.code!) ?? { tried: 0, acked: 0, ackedEarly: 0, lastAck: [] };
    entry.tried++;
    if (r.status === 302) {
      entry.acked++;
      entry.lastAck.push(r.endedAt);
      if (r.endedAt < killedAt - WRITTEN_WITHIN_MS) entry.ackedEarly++;
    }
    perCode.set(r.code!, entry);
  }
  let acked = 0;
  let lost = 0;
  let oldestLostAgeMs = 0;
  const tooOld: string[] = [];
  const phantom: string[] = [];
  for (const [code, e] of perCode) {
    const n = stored.get(code) ?? 0;
    acked += e.acked;
    const missing = e.acked - n;
    if (missing > 0) {
      lost += missing;
      // The clicks lost are at best the latest ones: the age of the oldest that must be among them.
      const latest = e.lastAck.sort((x, y) => x - y).slice(-missing);
      oldestLostAgeMs = Math.max(oldestLostAgeMs, killedAt - latest[0]!);
    }
    if (n < e.ackedEarly)
      tooOld.push(`${code}: ${e.ackedEarly} clicks acknowledged before the last interval, ${n} stored`);
    if (n > e.tried) phantom.push(`${code}: ${e.tried} redirects sent, ${n} clicks stored`);
  }
  return { acked, lost, oldestLostAgeMs, tooOld, phantom };
}

/**
 * What the file holds after the restart: the events in the embedded log at once, then in the
 * event store once it has caught up (its consumer waits for the killed process's lease), and the clicks.
 */
async function survived(file: string, records: readonly OpRecord[], killedAt: number) {
  const log = await settle(records, async () => sqliteState(file, 'event_log'), { timeoutMs: 5000, quietMs: 0 });
  const store = await settle(records, async () => sqliteState(file, 'event_store'), { timeoutMs: 20_000 });
  const clicks = clickAccount(records, storedClicks(file), killedAt);
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
    // `npm start`'s defaults but for the file and rate limits high enough for the load.
    const env = {
      DATABASE_URL: database.databaseUrl,
      RATE_LIMIT_AUTH_LIMIT: UNLIMITED,
      RATE_LIMIT_WRITES_LIMIT: UNLIMITED,
      RATE_LIMIT_REDIRECTS_LIMIT: UNLIMITED,
      RATE_LIMIT_DEFAULT_LIMIT: UNLIMITED,
    };
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
