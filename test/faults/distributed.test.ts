/**
 * The fault suite (issue #11): the distributed deployment (two `--role api` processes and one
 * `--role worker` on PostgreSQL, Redis and NATS JetStream), under concurrent writers, with the
 * faults an operator meets. The backends are the suite's own processes, on ports of their own,
 * so it can stop, pause and restart them. Each scenario checks every acknowledged change against
 * the worker's event store (exactly one event each, none lost) and what the database holds, and
 * records load, fault, acknowledged, lost, duplicated and recovery time in
 * test-results/faults-summary.json.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FaultBackends, FaultCluster, faultSuiteAvailable, signUp } from './cluster.js';
import { revokedAndLocked } from './accounts.js';
import { Load, type LoadOptions, type OpRecord } from './load.js';
import { conclude, expectSound, malformedErrors, unexpectedAnswers } from './scenario.js';
import { recoveryMs } from './summary.js';
import { eventually } from '../helpers/eventually.js';

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
      mix: MIX,
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
      loadText: `${load.records.length} writes (5:3:1) and executions, concurrency 32, 2 api + 1 worker`,
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

  it('d. NATS restarted under load: writes stay acknowledged, every event arrives', async () => {
    // Messages the broker was handing out when it stopped come again after the ack wait: 10 s
    // rather than the default 30 s keeps the scenario short (with 30 s, the last events arrived 21 to 34 s after the load).
    cluster = await FaultCluster.start(backends, 'nats', { env: { NATS_ACK_WAIT_MS: String(NATS_ACK_WAIT_MS) } });
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
    await sleep(5000);
    await backends.startNats();
    const clearedAt = Date.now();
    await sleep(4000);
    const conclusion = await conclude({
      cluster,
      load,
      scenario: 'd. NATS restarted',
      loadText: `${load.records.length} writes (5:3:1) and executions, concurrency 32, 2 api + 1 worker`,
      fault: 'nats-server stopped at 2 s for 5 s, restarted on the same port and store',
      clearedAt,
      settleTimeoutMs: 3 * NATS_ACK_WAIT_MS,
      notes: { natsAckWaitMs: NATS_ACK_WAIT_MS },
    });
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
