import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/adapters/redis/connect-redis.js';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import { AUTH_TEST_ENV } from '../helpers/auth.js';
import { BACKENDS, type TestDatabase, testConfig } from '../helpers/backends.js';
import { type BrowserSession, newAccount, send, sessionOf } from '../helpers/http-client.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { type ServerProcess, startAdministeredPair } from '../helpers/server-process.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';

const redisUp = await redisAvailable();
const ADMIN = { username: 'lockadmin', email: 'lockadmin@example.com', password: 'lockout-two-processes-admin' };
const MAX_ATTEMPTS = 5;
const ACCOUNTS = 6;
/** Requests each of an account's two clients sends. */
const STEPS = 40;
/** Accounts whose fifth failure races an unlock. */
const RACED = 120;

type Step = 'fail' | 'login' | 'unlock';
/** What each step may answer: a failure counts (401) unless the account is locked (423), and so on. */
const ANSWERS: Record<Step, readonly number[]> = { fail: [401, 423], login: [200, 423], unlock: [200] };

/** A fixed sequence of steps per client (a small LCG), so that a failing run can be told apart from another by its seed. */
function steps(seed: number): Step[] {
  let state = seed;
  return Array.from({ length: STEPS }, () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    const draw = state / 2 ** 31;
    return draw < 0.55 ? 'fail' : draw < 0.8 ? 'login' : 'unlock';
  });
}

/**
 * Lockouts changed from two `serve` processes at once, on one database and one Redis: failed
 * logins, successful logins (which clear the failures) and an administrator's unlocks of the same
 * accounts, through both processes concurrently. Each change commits in the database and is then
 * copied to Redis, which every instance reads while its copy is complete, so a copy that arrives
 * after a newer change's (the race 9029f3a closed) would leave Redis telling every instance
 * something the database does not hold. Afterwards, for each account: the copy holds what the
 * database holds (count and version), and both processes act on it (the remaining failures answer
 * 401, then the right password 423; or 423 at once when it is locked). Then the race itself, many
 * times over: accounts with four failures each get their fifth through one process while the other
 * unlocks them, all at once. On the build before 9029f3a (counts compared, its schema has no
 * version) that part failed 3 runs of 3, both ways: Redis holding 5 failures (the account locked on
 * every instance) where the database held none, and Redis holding none where the database held 1.
 */
describe.each(BACKENDS)('lockouts from two processes sharing Redis on $name', (backend) => {
  const available = backend.available && redisUp;
  const test = it.skipIf(!available);
  const prefix = uniqueRedisPrefix('lockout-two');
  let database: TestDatabase;
  let servers: ServerProcess[] = [];

  beforeAll(async () => {
    if (!available) return;
    database = await backend.create();
    const env = {
      ...AUTH_TEST_ENV,
      DATABASE_URL: database.databaseUrl,
      REDIS_URL,
      REDIS_KEY_PREFIX: prefix,
      // Every request comes from 127.0.0.1: the per-address throttle would refuse them all.
      LOGIN_ADDRESS_MAX_FAILURES: '0',
      MAX_LOGIN_ATTEMPTS: String(MAX_ATTEMPTS),
    };
    servers = await startAdministeredPair(env, ADMIN);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop('SIGKILL')));
    servers = [];
    await database?.drop();
    if (available) await deleteRedisKeys(prefix);
  });

  const login = (server: ServerProcess, username: string, password: string) =>
    send(server.url, 'POST', '/api/v1/auth/login', { body: { username, password } });
  const signIn = async (server: ServerProcess, body: { username: string; password: string }) => {
    const session = sessionOf(await login(server, body.username, body.password));
    expect(session).toBeDefined();
    return session as BrowserSession;
  };
  const register = async (server: ServerProcess) => {
    const account = newAccount('locktwo');
    const registered = await send(server.url, 'POST', '/api/v1/auth/register', { body: account });
    expect(registered.status, registered.text).toBe(201);
    return { ...account, id: registered.json<{ id: number }>().id };
  };
  const unlock = (server: ServerProcess, admin: BrowserSession, id: number) =>
    send(server.url, 'POST', `/api/v1/admin/users/${id}/unlock`, { session: admin });

  /**
   * For each account: Redis's copy holds the database's record (its count and version; none when
   * there is none), and both processes act on it: the failures left to the limit answer 401, then
   * the right password answers 423 through each.
   */
  const expectCopyAndDatabaseAgree = async (accounts: ReadonlyArray<{ username: string; password: string }>) => {
    const [a, b] = servers as [ServerProcess, ServerProcess];
    let db: Database | undefined;
    const redis = connectRedis(REDIS_URL, 'lockout-two-check');
    try {
      db = openDatabase(testConfig(database.databaseUrl).database);
      // The copy is complete: instances read it, not the database.
      expect(await redis.exists(`${prefix}auth:seeded`)).toBe(1);
      for (const account of accounts) {
        const row = await db.db
          .selectFrom('auth_login_failures')
          .select(['failures', 'expires_at_ms', 'version'])
          .where('subject', '=', account.username)
          .executeTakeFirst();
        const copy = await redis.get(`${prefix}auth:failures:${account.username}`);
        const stored = row === undefined ? undefined : [Number(row.failures), Number(row.version)];
        const copied = copy === null ? undefined : [Number(copy.split(':')[0]), Number(copy.split(':')[2])];
        expect(copied, `${account.username}: Redis ${copy}, database ${JSON.stringify(row)}`).toEqual(stored);

        const failures = stored?.[0] ?? 0;
        for (let n = failures; n < MAX_ATTEMPTS; n++) {
          const answer = await login(n % 2 ? b : a, account.username, 'wrong password!');
          expect(answer.status, `${account.username}: failure ${n + 1} of ${MAX_ATTEMPTS}`).toBe(401);
        }
        for (const server of [a, b]) expect((await login(server, account.username, account.password)).status).toBe(423);
      }
    } finally {
      await db?.db.destroy();
      await redis.quit();
    }
  };

  test('after concurrent failures, logins and unlocks, Redis holds what the database holds, and both act on it', async () => {
    const [a, b] = servers as [ServerProcess, ServerProcess];
    const admin = await signIn(a, ADMIN);
    const accounts: Array<Awaited<ReturnType<typeof register>>> = [];
    for (let i = 0; i < ACCOUNTS; i++) accounts.push(await register(i % 2 ? b : a));

    const unexpected: string[] = [];
    const tally = { fail: 0, login: 0, unlock: 0, locked: 0 };
    const client = async (server: ServerProcess, account: (typeof accounts)[number], seed: number) => {
      for (const step of steps(seed)) {
        const answer =
          step === 'unlock'
            ? await unlock(server, admin, account.id)
            : await login(server, account.username, step === 'fail' ? 'wrong password!' : account.password);
        if (!ANSWERS[step].includes(answer.status)) unexpected.push(`${step} ${answer.status} ${answer.text}`);
        tally[answer.status === 423 ? 'locked' : step]++;
      }
    };
    await Promise.all(accounts.flatMap((account, i) => [client(a, account, 2 * i + 1), client(b, account, 2 * i + 2)]));
    expect(unexpected).toEqual([]);
    // The run exercised all three changes and the lockout itself.
    for (const count of Object.values(tally)) expect(count).toBeGreaterThan(0);
    console.log(`lockouts from two processes on ${backend.name}: answers ${JSON.stringify(tally)}`);

    await expectCopyAndDatabaseAgree(accounts);
  }, 120_000);

  test('a failure and an unlock of one account at the same moment, through the two processes, many accounts at once', async () => {
    const [a, b] = servers as [ServerProcess, ServerProcess];
    const admin = await signIn(b, ADMIN);
    const accounts = await Promise.all(Array.from({ length: RACED }, (_, i) => register(i % 2 ? b : a)));
    // Four failures each: the fifth, if its copy landed after the unlock's, would lock the account everywhere.
    await Promise.all(
      accounts.map(async (account) => {
        for (let n = 1; n < MAX_ATTEMPTS; n++) {
          expect((await login(n % 2 ? b : a, account.username, 'wrong password!')).status).toBe(401);
        }
      }),
    );
    // The unlock sent 0 to 5 ms after the failure: the failure's bcrypt check comes before its
    // write, so unlocks sent at once mostly land before it; some of these land in between.
    const answers = await Promise.all(
      accounts.flatMap((account, i) => [
        login(a, account.username, 'wrong password!').then((answer) => answer.status),
        sleep(i % 6)
          .then(() => unlock(b, admin, account.id))
          .then((answer) => answer.status),
      ]),
    );
    expect(
      answers.every((status, i) => status === (i % 2 ? 200 : 401)),
      JSON.stringify(answers),
    ).toBe(true);
    await expectCopyAndDatabaseAgree(accounts);
  }, 120_000);
});
