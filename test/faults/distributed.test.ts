/**
 * The fault suite (issue #11): the distributed deployment (two `--role api` processes and one
 * `--role worker` on PostgreSQL, Redis and NATS JetStream), under concurrent writers, with the
 * faults an operator meets. The backends are the suite's own processes, on ports of their own,
 * so it can stop, pause and restart them. Each scenario checks every acknowledged change against
 * the worker's event store (exactly one event each, none lost) and what the database holds (and,
 * where the load redirects, every 302's click stored exactly once after a graceful stop), and
 * records load, fault, acknowledged, lost, duplicated and recovery time in
 * test-results/faults-summary.json.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { clickAccount, postgresClicks } from './checker.js';
import { FaultBackends, FaultCluster, faultSuiteAvailable, signUp } from './cluster.js';
import { revokedAndLocked } from './accounts.js';
import { Load, type LoadOptions, type OpRecord } from './load.js';
import { conclude, expectSound, malformedErrors, unexpectedAnswers } from './scenario.js';
import { recoveryMs } from './summary.js';
import { eventually } from '../helpers/eventually.js';
import { fetchShorten } from '../helpers/http.js';
import { send } from '../helpers/http-client.js';

const available = faultSuiteAvailable();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** The writers' mix; executions come besides, one every EXECUTE_EVERY_MS. */
const MIX = { create: 5, update: 3, delete: 1 };
const EXECUTE_EVERY_MS = 100;
/** Writes of the no-fault scenario; `FAULTS_WRITES=20000` repeats the measurement. */
const WRITES = Number(process.env.FAULTS_WRITES ?? 3000);
/** A per-user cap on queued executions may refuse some under load (429): refused, not lost. */
const EXECUTE_MAY_BE_REFUSED = { 429: ['execute'] };
const ALL_KINDS = ['create', 'update', 'delete', 'execute', 'redirect', 'session'];
/**
 * "Answered promptly" while Redis is away or frozen: every Redis call is to have a short deadline,
 * so no request may wait anywhere near this long (issue #11 saw 3 to 6 s per request with Redis
 * stopped, and 25 s with it paused for 25 s).
 */
const PROMPT_MS = 3000;
/** The broker's redelivery wait in the NATS scenario. */
const NATS_ACK_WAIT_MS = 10_000;
/** Every execution of a killed worker is finished by another within this of the kill. */
const HANDOVER_MS = 20_000;

/** Where `GET /{code}` on `base` redirects to (its cache answers when it holds the link). */
async function locationOf(base: string, code: string): Promise<string | null> {
  return (await send(base, 'GET', `/${code}`)).headers.get('location');
}

/** Answers slower than `ms`, described. */
function slowAnswers(records: readonly OpRecord[], ms: number): string[] {
  return records
    .filter((r) => r.endedAt - r.startedAt > ms)
    .map((r) => `${r.kind} → ${r.status ?? 'no answer'} after ${r.endedAt - r.startedAt} ms`);
}

/** How many executions of the scenario's database have this status. */
async function executionsWithStatus(databaseUrl: string, status: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>('SELECT count(*) AS n FROM executions WHERE status = $1', [
      status,
    ]);
    return Number(rows[0]!.n);
  } finally {
    await client.end();
  }
}

describe.skipIf(!available)('the distributed deployment under load and faults', () => {
  let backends: FaultBackends;
  let cluster: FaultCluster | undefined;
  /** The scenario's load, stopped after it whatever happened (a timed-out scenario leaves it running). */
  let running: Load | undefined;
  const startLoad = (options: LoadOptions, total?: number) => (running = new Load(options).start(total));

  beforeAll(async () => {
    backends = await FaultBackends.start();
  }, 60_000);
  afterEach(async () => {
    await running?.stop();
    running = undefined;
    await cluster?.stop();
    cluster = undefined;
    await backends.ensureUp();
  }, 60_000);
  afterAll(async () => {
    await backends?.destroy();
  }, 60_000);

  async function sessions(c: FaultCluster, prefix: string, n: number): Promise<string[]> {
    const users = await Promise.all(Array.from({ length: n }, (_, i) => signUp(c.targets[i % 2]!, `${prefix}${i}`)));
    return users.map((u) => u.cookie);
  }

  it(
    'a. no fault: concurrent writers across both API processes lose and double nothing',
    async () => {
      cluster = await FaultCluster.start(backends, 'nofault');
      const load = startLoad(
        {
          targets: cluster.targets,
          concurrency: 32,
          mix: MIX,
          executeEveryMs: EXECUTE_EVERY_MS,
          codePrefix: 'a',
          sessions: await sessions(cluster, 'nofault', 4),
        },
        WRITES,
      );
      await load.done();
      const conclusion = await conclude({
        cluster,
        load,
        scenario: 'a. no fault',
        loadText: `${WRITES} writes (create/update/delete 5:3:1) at concurrency 32, plus executions one at a time every ${EXECUTE_EVERY_MS} ms; 2 api + 1 worker`,
        fault: 'none',
      });
      expect.soft(unexpectedAnswers(load.records, EXECUTE_MAY_BE_REFUSED), 'answers other than a success').toEqual([]);
      expectSound(cluster, conclusion);
    },
    60_000 + WRITES * 20,
  );

  it('b. the database drops every connection, then restarts, under load: 503s, no exits, nothing lost', async () => {
    cluster = await FaultCluster.start(backends, 'database');
    const load = startLoad({
      targets: cluster.targets,
      concurrency: 32,
      // Redirects too: their clicks are flushed through the same drops (a flush whose COMMIT
      // answer is lost must not count twice).
      mix: { ...MIX, redirect: 3 },
      executeEveryMs: EXECUTE_EVERY_MS,
      codePrefix: 'b',
      sessions: await sessions(cluster, 'database', 4),
      requestTimeoutMs: 20_000,
    });
    await sleep(2000);
    const terminatedAt = Date.now();
    const terminated = await backends.postgres.terminateConnections(cluster.databaseName);
    await sleep(4000);
    // A crash of the server (`immediate`), down for 2 s, then back on the same port and data.
    await backends.postgres.stop('immediate');
    await sleep(2000);
    await backends.postgres.start();
    const clearedAt = Date.now();
    await sleep(5000);
    const conclusion = await conclude({
      cluster,
      load,
      scenario: 'b. database connections dropped, then restarted',
      loadText: `${load.records.length} writes and redirects (create/update/delete/redirect 5:3:1:3) and executions, concurrency 32, 2 api + 1 worker`,
      fault: `pg_terminate_backend on all ${terminated} connections at 2 s; PostgreSQL crashed (immediate) at 6 s, down 2 s`,
      clearedAt,
      notes: {
        terminatedConnections: terminated,
        recoveryAfterTerminateMs: recoveryMs(load.records, terminatedAt, cluster.apis.length),
      },
    });
    expect.soft(terminated, 'the service had connections to drop').toBeGreaterThan(0);
    // In-flight requests fail with 503 {detail} or succeed; nothing goes unanswered.
    expect
      .soft(
        unexpectedAnswers(load.records, { 503: ALL_KINDS, ...EXECUTE_MAY_BE_REFUSED }),
        'answers other than a success or 503',
      )
      .toEqual([]);
    expect.soft(malformedErrors(load.records), 'error answers that are not {detail}').toEqual([]);
    expectSound(cluster, conclusion);

    // A graceful stop writes the clicks each API process still holds: then every 302 is stored
    // exactly once.
    for (const api of cluster.apis) await cluster.kill(api, 'SIGTERM');
    for (const api of cluster.apis) expect.soft(api.child.exitCode, `${api.url} stopped gracefully`).toBe(0);
    const clicks = clickAccount(load.records, await postgresClicks(cluster.databaseUrl));
    console.log(`b. clicks: ${clicks.acked} acknowledged, ${clicks.lost} lost, ${clicks.phantom.length} mappings over`);
    expect.soft(clicks.acked, 'redirects answered 302').toBeGreaterThan(0);
    expect.soft(clicks.lost, 'acknowledged clicks not stored after a graceful stop').toBe(0);
    expect.soft(clicks.phantom, 'clicks stored twice or never made').toEqual([]);
  }, 120_000);

  it('c. Redis stopped, then frozen, under load: prompt answers, rate limits open, revocations and lockouts hold', async () => {
    cluster = await FaultCluster.start(backends, 'redis');
    // Made before the faults: a session logged out, an account locked out. Another account's
    // five failed logins: two before the faults, two while Redis is stopped, one while it is paused.
    const accounts = await revokedAndLocked(cluster.targets);
    const failedLogins = [await accounts.fail(), await accounts.fail()];
    const load = startLoad({
      targets: cluster.targets,
      concurrency: 32,
      mix: { create: 4, update: 2, delete: 1, redirect: 4, session: 2 },
      executeEveryMs: EXECUTE_EVERY_MS,
      codePrefix: 'c',
      sessions: await sessions(cluster, 'redis', 4),
      requestTimeoutMs: 30_000,
    });
    await sleep(2000);
    await backends.redis.stop();
    const stoppedAt = Date.now();
    await sleep(2000);
    failedLogins.push(await accounts.fail(), await accounts.fail());
    await sleep(6000 - (Date.now() - stoppedAt));
    await backends.redis.start(); // empty: it keeps nothing on disk
    const restartedAt = Date.now();
    await sleep(4000);
    backends.redis.pause();
    const pausedAt = Date.now();
    await sleep(3000);
    failedLogins.push(await accounts.fail());
    await sleep(10_000 - (Date.now() - pausedAt));
    backends.redis.resume();
    const clearedAt = Date.now();
    await sleep(4000);
    const unhandled = cluster.countOutput(/Unhandled error event/);
    const conclusion = await conclude({
      cluster,
      load,
      scenario: 'c. Redis stopped, then paused',
      loadText: `${load.records.length} requests (writes, redirects, /me, executions), concurrency 32, 2 api + 1 worker`,
      fault: 'Redis stopped at 2 s for 6 s and restarted empty; paused (SIGSTOP) 4 s later for 10 s',
      clearedAt,
      notes: {
        recoveryAfterRestartMs: recoveryMs(load.records, restartedAt, cluster.apis.length),
        slowestAnswerMs: load.records.reduce((max, r) => Math.max(max, r.endedAt - r.startedAt), 0),
        unhandledErrorLogLines: unhandled,
      },
    });
    // Rate limiting fails open: changes and redirects succeed; only what needs a session may answer 503.
    expect
      .soft(
        unexpectedAnswers(load.records, { 503: ['execute', 'session'], ...EXECUTE_MAY_BE_REFUSED }),
        'answers other than a success (503 only where a session is checked)',
      )
      .toEqual([]);
    expect.soft(malformedErrors(load.records), 'error answers that are not {detail}').toEqual([]);
    expect.soft(slowAnswers(load.records, PROMPT_MS), `answers slower than ${PROMPT_MS} ms`).toEqual([]);
    expect.soft(unhandled, '"Unhandled error event" lines in the logs').toBe(0);
    // What must survive a Redis that lost everything: the logout and the lockout.
    const after = await accounts.check();
    accounts.close();
    expect.soft(after.revoked, 'a logged-out session after the Redis restart').toBe(401);
    expect.soft(after.locked, 'a locked account after the Redis restart').toBe(423);
    expect.soft(after.fresh, 'a new session after the faults').toBe(200);
    expect.soft(failedLogins, 'failed logins before and during the faults').toEqual([401, 401, 401, 401, 401]);
    expect.soft(after.counted, 'the account with five failed logins, through each API process').toEqual([423, 423]);
    expectSound(cluster, conclusion);
  }, 120_000);

  it('d. NATS restarted under load: writes stay acknowledged, every event arrives, caches follow', async () => {
    // Messages the broker was handing out when it stopped come again after the ack wait: 10 s
    // rather than the default 30 s keeps the scenario short (with 30 s, the last events arrived 21 to 34 s after the load).
    // The caches keep a link 10 minutes: only an invalidation through NATS can change what they serve.
    cluster = await FaultCluster.start(backends, 'nats', {
      env: { NATS_ACK_WAIT_MS: String(NATS_ACK_WAIT_MS), CACHE_TTL_MS: '600000' },
    });
    const [apiA, apiB] = cluster.targets as [string, string];
    // Links cached on the second API process before the fault; the first changes them while NATS
    // is down and just after it is back.
    const cached = Array.from({ length: 6 }, (_, i) => `dcache${i}`);
    const changed = new Map<string, string>();
    for (const code of cached) {
      const created = await fetchShorten(apiA, { code, url: `https://example.com/${code}/v1` });
      expect(created.status).toBe(201);
      expect(await locationOf(apiB, code)).toBe(`https://example.com/${code}/v1`);
    }
    const change = async (code: string) => {
      const url = `https://example.com/${code}/v2`;
      const patched = await send(apiA, 'PATCH', `/${code}`, { body: { url } });
      expect(patched.status, patched.text).toBe(200);
      changed.set(code, url);
    };
    const load = startLoad({
      targets: cluster.targets,
      concurrency: 32,
      mix: MIX,
      executeEveryMs: EXECUTE_EVERY_MS,
      codePrefix: 'd',
      sessions: await sessions(cluster, 'nats', 4),
      requestTimeoutMs: 20_000,
    });
    await sleep(2000);
    await backends.stopNats();
    await sleep(1000);
    for (const code of cached.slice(0, 3)) await change(code);
    await sleep(4000);
    await backends.startNats();
    const clearedAt = Date.now();
    for (const code of cached.slice(3)) await change(code);
    // Every cache follows the changes within seconds of NATS coming back, not after its TTL.
    const followedMs = await eventually(
      async () => {
        for (const [code, url] of changed) expect(await locationOf(apiB, code), code).toBe(url);
      },
      { timeoutMs: 3 * NATS_ACK_WAIT_MS, intervalMs: 200 },
    ).then(
      () => Date.now() - clearedAt,
      (error: unknown) => {
        console.log(`d. a cache did not follow: ${String(error)}`);
        return null;
      },
    );
    await sleep(Math.max(0, 4000 - (Date.now() - clearedAt)));
    const conclusion = await conclude({
      cluster,
      load,
      scenario: 'd. NATS restarted',
      loadText: `${load.records.length} writes (5:3:1) and executions, concurrency 32, 2 api + 1 worker`,
      fault: 'nats-server stopped at 2 s for 5 s, restarted on the same port and store',
      clearedAt,
      settleTimeoutMs: 3 * NATS_ACK_WAIT_MS,
      notes: { natsAckWaitMs: NATS_ACK_WAIT_MS, cachesFollowedMs: followedMs },
    });
    expect.soft(followedMs, 'the other API process served every change made while NATS was away').not.toBeNull();
    expect.soft(unexpectedAnswers(load.records, EXECUTE_MAY_BE_REFUSED), 'answers other than a success').toEqual([]);
    expectSound(cluster, conclusion);
  }, 120_000);

  it('e. the worker killed mid-execution: another takes over, every execution finishes exactly once', async () => {
    cluster = await FaultCluster.start(backends, 'worker');
    // Executions of about 300 ms each, more than one worker thread gets through in the time.
    const load = startLoad(
      {
        targets: cluster.targets,
        concurrency: 6,
        mix: { execute: 1, create: 2 },
        codePrefix: 'e',
        sessions: await sessions(cluster, 'worker', 6),
        script: 'const end = Date.now() + 300; while (Date.now() < end) {} "done"',
        requestTimeoutMs: 20_000,
      },
      72,
    );
    await load.done();
    // Killed while running one, after it finished at least one (so well into its queue).
    const url = cluster.databaseUrl;
    const runningAtKill = await eventually(async () => {
      const [busy, done] = await Promise.all([
        executionsWithStatus(url, 'running'),
        executionsWithStatus(url, 'completed'),
      ]);
      return busy > 0 && done > 0 ? busy : false;
    });
    const killedAt = Date.now();
    await cluster.kill(cluster.workers[0]!);
    await cluster.addWorker();
    const workerStartMs = Date.now() - killedAt;
    const conclusion = await conclude({
      cluster,
      load,
      scenario: 'e. worker killed mid-execution',
      loadText: `${load.records.length} requests (executions of ~300 ms and creates), concurrency 6, 2 api + 1 worker`,
      fault: `kill -9 of the only worker with ${runningAtKill} execution(s) running; a second worker started at once`,
      // Recovery: from the kill until every execution is finished and every event stored.
      caughtUpFrom: killedAt,
      // Handed on in seconds, not after the broker's 30 s redelivery wait.
      settleTimeoutMs: Math.max(5000, HANDOVER_MS - (Date.now() - killedAt)),
      notes: { runningAtKill, handoverBoundMs: HANDOVER_MS, workerStartMs },
    });
    expect.soft(unexpectedAnswers(load.records, EXECUTE_MAY_BE_REFUSED), 'answers other than a success').toEqual([]);
    expectSound(cluster, conclusion);
  }, 120_000);
});
