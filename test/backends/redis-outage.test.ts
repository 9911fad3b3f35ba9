/**
 * Redis slow or away, against a started process of the built service using a redis-server of the
 * test's own (stopped, restarted empty, paused with SIGSTOP). Redirects and writes keep answering,
 * each within 2 s, with rate limiting failing open and counting it; logins, sessions and logouts
 * keep working from the database; revocations and lockouts hold through the outage and through
 * Redis coming back empty; the log says once that Redis is away and once that it is back, and
 * never "Unhandled error event".
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqlite, type TestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, newMapping } from '../helpers/http.js';
import { OwnRedisServer, redisServerBinaryAvailable } from '../helpers/own-redis-server.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { type Answer, type BrowserSession, newAccount, send, sessionOf } from '../helpers/http-client.js';

const ANSWER_BOUND_MS = 2000;
const LOCKED = 423;

describe.skipIf(!redisServerBinaryAvailable())('the service while its Redis is stopped, restarted and paused', () => {
  let redis: OwnRedisServer;
  let database: TestDatabase;
  let service: ServerProcess;
  const nextCode = codeMaker('rdo');
  const codes: string[] = [];
  let user: ReturnType<typeof newAccount>;
  let revokedBefore: BrowserSession;
  let locked: ReturnType<typeof newAccount>;

  const lines = (pattern: RegExp) =>
    service
      .output()
      .split('\n')
      .filter((line) => pattern.test(line)).length;
  const away = () => lines(/"msg":"Redis is away/);
  const back = () => lines(/"msg":"Redis is back"/);
  const login = (account: { username: string; password: string }) =>
    send(service.url, 'POST', '/api/v1/auth/login', {
      body: { username: account.username, password: account.password },
    });
  const failOpenCount = async () => {
    const metrics = await send(service.url, 'GET', '/metrics');
    return metrics.text
      .split('\n')
      .filter((line) => line.startsWith('rate_limit_fail_open_total{'))
      .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
  };

  /** 60 redirects and 20 writes at once; each must answer correctly within the bound. */
  async function trafficAnswersPromptly(): Promise<Answer[]> {
    const redirects = Array.from({ length: 60 }, (_, i) => send(service.url, 'GET', `/${codes[i % codes.length]}`));
    const writes = Array.from({ length: 20 }, () =>
      send(service.url, 'POST', '/shorten', { body: newMapping(nextCode) }),
    );
    const [redirected, written] = [await Promise.all(redirects), await Promise.all(writes)];
    for (const answer of redirected) expect(answer.status, answer.text).toBe(302);
    for (const answer of written) expect(answer.status, answer.text).toBe(201);
    const all = [...redirected, ...written];
    for (const answer of all) expect(answer.ms).toBeLessThan(ANSWER_BOUND_MS);
    return all;
  }

  /** Login, /me, logout, and the logged-out token refused: all from the database. */
  async function sessionsWork(): Promise<Answer[]> {
    const answered = await login(user);
    expect(answered.status, answered.text).toBe(200);
    const session = sessionOf(answered)!;
    const me = await send(service.url, 'GET', '/api/v1/auth/me', { session });
    expect(me.status, me.text).toBe(200);
    const logout = await send(service.url, 'POST', '/api/v1/auth/logout', { session });
    expect(logout.status, logout.text).toBe(200);
    const after = await send(service.url, 'GET', '/api/v1/auth/me', { session });
    expect(after.status).toBe(401);
    const old = await send(service.url, 'GET', '/api/v1/auth/me', { session: revokedBefore });
    expect(old.status).toBe(401);
    const lockedOut = await login(locked);
    expect(lockedOut.status).toBe(LOCKED);
    const all = [answered, me, logout, after, old, lockedOut];
    for (const answer of all) expect(answer.ms).toBeLessThan(ANSWER_BOUND_MS);
    return all;
  }

  const describeLatency = (answers: Answer[]) => {
    const ms = answers.map((a) => a.ms).sort((a, b) => a - b);
    return `median ${ms[Math.floor(ms.length / 2)]!.toFixed(0)} ms, max ${ms.at(-1)!.toFixed(0)} ms over ${ms.length}`;
  };

  beforeAll(async () => {
    redis = await OwnRedisServer.create();
    await redis.start();
    database = await sqlite.create();
    service = await startServer({
      DATABASE_URL: database.databaseUrl,
      REDIS_URL: redis.url,
      NODE_ENV: 'test',
      BCRYPT_ROUNDS: '4',
      RATE_LIMIT_ENABLED: 'true',
      RATE_LIMIT_AUTH_LIMIT: '100000',
      RATE_LIMIT_WRITES_LIMIT: '100000',
      RATE_LIMIT_DEFAULT_LIMIT: '100000',
    });
    for (let i = 0; i < 10; i++) {
      const body = newMapping(nextCode);
      expect((await send(service.url, 'POST', '/shorten', { body })).status).toBe(201);
      codes.push(body.code);
    }
    user = newAccount('rdo');
    locked = newAccount('rdl');
    for (const account of [user, locked]) {
      expect((await send(service.url, 'POST', '/api/v1/auth/register', { body: account })).status).toBe(201);
    }
    revokedBefore = sessionOf(await login(user))!;
    expect((await send(service.url, 'POST', '/api/v1/auth/logout', { session: revokedBefore })).status).toBe(200);
    for (let i = 0; i < 5; i++) await login({ ...locked, password: 'wrong password!' });
    expect((await login(locked)).status).toBe(LOCKED);
  }, 60_000);
  afterAll(async () => {
    await service?.stop();
    await redis?.stop();
    await database?.drop();
  });

  it('answers promptly while Redis is stopped, and resumes when it comes back empty', async () => {
    const failOpenBefore = await failOpenCount();
    await redis.stop();
    const traffic = await trafficAnswersPromptly();
    const sessions = await sessionsWork();
    expect(await failOpenCount()).toBeGreaterThan(failOpenBefore);
    expect(away()).toBe(1);
    expect(back()).toBe(0);

    await new Promise((resolve) => setTimeout(resolve, 2000)); // reconnection attempts meanwhile
    const restartedAt = performance.now();
    await redis.start();
    await eventually(() => back() === 1, { timeoutMs: 10_000, intervalMs: 20 });
    const backAfter = performance.now() - restartedAt;
    await trafficAnswersPromptly();
    await sessionsWork(); // revocations and the lockout, rebuilt from the database into the empty Redis
    expect({ away: away(), back: back() }).toEqual({ away: 1, back: 1 });
    console.info(
      `Redis stopped: traffic ${describeLatency(traffic)}; sessions ${describeLatency(sessions)}; ` +
        `back ${backAfter.toFixed(0)} ms after redis-server was up again`,
    );
  });

  it('answers promptly while Redis is paused, and resumes on SIGCONT', async () => {
    redis.pause();
    const pausedAt = performance.now();
    const traffic = await trafficAnswersPromptly();
    const sessions = await sessionsWork();
    const more = await trafficAnswersPromptly();
    expect(away()).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 5000 - (performance.now() - pausedAt))));
    redis.resume();
    const resumedAt = performance.now();
    await eventually(() => back() === 2, { timeoutMs: 10_000, intervalMs: 20 });
    const backAfter = performance.now() - resumedAt;
    await trafficAnswersPromptly();
    await sessionsWork();
    expect({ away: away(), back: back() }).toEqual({ away: 2, back: 2 });
    console.info(
      `Redis paused 5 s: first traffic ${describeLatency(traffic)}; later traffic ${describeLatency(more)}; sessions ${describeLatency(sessions)}; ` +
        `back ${backAfter.toFixed(0)} ms after SIGCONT`,
    );
  });

  it('never logged "Unhandled error event", and the process is still up', () => {
    expect(service.output()).not.toMatch(/Unhandled error event/);
    expect(service.child.exitCode).toBeNull();
  });
});
