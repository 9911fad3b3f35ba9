/**
 * The per-user limit on queued and running executions holds across instances (issue #11): two
 * API processes of the built service on one database (no worker, so nothing leaves `queued`)
 * take a burst of one user's submissions at once, half through each; exactly the limit is
 * accepted (202) and every other answer is 429 `{detail}`, and the database holds exactly that
 * many. Another user's burst at the same moment is counted apart.
 */
import { randomBytes } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import { BACKENDS, testConfig, type TestDatabase } from '../helpers/backends.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';

const LIMIT = 5;
const BURST = 40;

async function post(base: string, path: string, body: unknown, cookie?: string) {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(cookie ? { cookie } : {}) },
    body: JSON.stringify(body),
  });
  return { status: response.status, text: await response.text(), cookies: response.headers.getSetCookie() };
}

async function signUpAt(base: string, name: string): Promise<string> {
  const user = { username: name, email: `${name}@example.com`, password: 'correct horse battery' };
  expect((await post(base, '/api/v1/auth/register', user)).status).toBe(201);
  const login = await post(base, '/api/v1/auth/login', { username: name, password: user.password });
  expect(login.status, login.text).toBe(200);
  return login.cookies.map((line) => line.split(';')[0]).join('; ');
}

describe.each(BACKENDS)('the per-user execution limit across two API processes on $name', (backend) => {
  let database: TestDatabase;
  const servers: ServerProcess[] = [];
  let db: Database;

  beforeAll(async () => {
    if (!backend.available) return;
    database = await backend.create();
    const env = {
      DATABASE_URL: database.databaseUrl,
      NODE_ENV: 'test',
      BCRYPT_ROUNDS: '4',
      RATE_LIMIT_ENABLED: 'false',
      SECRET_KEY: randomBytes(32).toString('hex'),
      EXECUTION_MAX_PENDING_PER_USER: String(LIMIT),
      EVENT_POLL_MS: '50',
    };
    // One after the other: the first creates the schema.
    servers.push(await startServer(env, ['serve', '--role', 'api']));
    servers.push(await startServer(env, ['serve', '--role', 'api']));
    db = openDatabase(testConfig(database.databaseUrl).database);
  });
  afterAll(async () => {
    for (const server of servers) await server.stop('SIGKILL');
    await db?.close();
    await database?.drop();
  });

  it.skipIf(!backend.available)(
    `one user's ${BURST} submissions at once, half through each instance: exactly ${LIMIT} accepted`,
    async () => {
      const [a, b] = servers.map((s) => s.url) as [string, string];
      const tag = randomBytes(3).toString('hex');
      const users = [await signUpAt(a, `lim${tag}a`), await signUpAt(b, `lim${tag}b`)];
      const burst = users.flatMap((cookie) =>
        Array.from({ length: BURST }, (_, i) =>
          post(i % 2 === 0 ? a : b, '/execute', { language: 'javascript', script: `${i}` }, cookie),
        ),
      );
      const answers = await Promise.all(burst);
      for (const u of users.keys()) {
        const mine = answers.slice(u * BURST, (u + 1) * BURST);
        const accepted = mine.filter((r) => r.status === 202);
        const refused = mine.filter((r) => r.status !== 202);
        expect(accepted, `user ${u}`).toHaveLength(LIMIT);
        for (const response of refused) {
          expect(response.status, response.text).toBe(429);
          expect(JSON.parse(response.text)).toEqual({ detail: expect.stringMatching(/at most 5/) });
        }
      }
      const stored = await sql<{ user_id: number; n: number }>`
        select user_id, count(*) as n from executions group by user_id`.execute(db.db as Kysely<unknown>);
      expect(stored.rows.map((r) => Number(r.n))).toEqual([LIMIT, LIMIT]);
    },
  );
});
