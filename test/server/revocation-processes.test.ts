/**
 * Revocations across processes, with the database failing under load. Two API processes share one
 * database. Users call both with their API keys and session cookies, and two administrators'
 * sessions call an admin-only route, many requests at once. Meanwhile users revoke their keys and
 * an administrator disables accounts and demotes an administrator, through either process, while
 * the database fails under them (PostgreSQL: the processes' connections dropped seven times;
 * SQLite: another process holds the write lock past the busy timeout).
 *
 * The checker counts what was acknowledged against what was let in: once a revocation, a disable
 * or a demotion was answered 2xx, no request with that credential that started after the answer
 * gets through on either process; every answer is a success, 401, 403 or 503 with a `{detail}`;
 * and the credentials nobody touched work again on both processes once the database is back.
 * And one username or email registered many times at once through both processes makes one
 * account of it.
 */
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { FLEET_VARIANTS, useFleet } from '../helpers/fleet.js';
import {
  type BrowserSession,
  isDetailBody,
  logIn,
  newAccount,
  newSignedInAccount,
  send,
  untilAcknowledged,
} from '../helpers/http-client.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ADMIN = { username: 'revoker', email: 'revoker@example.com', password: 'correct horse battery staple' };

/** A credential the load uses: an API key, or a session cookie on `/auth/me` or on an admin-only route. */
interface Credential {
  readonly name: string;
  readonly kind: 'key' | 'session' | 'admin-session';
  readonly key?: string;
  readonly session?: BrowserSession;
  /** When the change that refuses it was acknowledged (ms since the epoch); undefined: never. */
  refusedFrom?: number;
}

interface Call {
  readonly credential: Credential;
  readonly process: number;
  readonly startedAt: number;
  readonly status: number | null;
  readonly text: string;
}

async function call(base: string, credential: Credential): Promise<{ status: number | null; text: string }> {
  const path = credential.kind === 'admin-session' ? '/api/v1/admin/users' : '/api/v1/auth/me';
  try {
    if (credential.kind === 'key') {
      const response = await fetch(`${base}${path}`, {
        headers: { authorization: `Bearer ${credential.key}` },
        signal: AbortSignal.timeout(20_000),
      });
      return { status: response.status, text: await response.text() };
    }
    const answer = await send(base, 'GET', path, { session: credential.session });
    return { status: answer.status, text: answer.text };
  } catch (error) {
    return { status: null, text: String(error) };
  }
}

/** Changes answered 503 (the database away) before they went through. */
let changesRefused = 0;

/** Sends `change` until it is answered 2xx (a 503 is the database away): when it was. */
async function acknowledged(change: () => Promise<{ status: number; text: string }>): Promise<number> {
  changesRefused += await untilAcknowledged(change);
  return Date.now();
}

const VARIANTS = FLEET_VARIANTS.filter((variant) => !variant.nats);

describe.each(VARIANTS)('revocations across two API processes, the database failing, on $name', (variant) => {
  const test = it.skipIf(!variant.available);
  const fleet = useFleet(
    variant,
    {
      RATE_LIMIT_ENABLED: 'false',
      ADMIN_USERNAME: ADMIN.username,
      ADMIN_EMAIL: ADMIN.email,
      ADMIN_PASSWORD: ADMIN.password,
      BCRYPT_ROUNDS: '4',
      NODE_ENV: 'test',
    },
    { workers: 0, apis: 2 },
  );

  test('no credential gets through on either process once its revocation was answered', async () => {
    changesRefused = 0;
    const [a, b] = fleet.apis.map((p) => p.url) as [string, string];
    const admin = await logIn(a, ADMIN.username, ADMIN.password);

    /** A user with a session and an API key; their id. */
    const user = async (n: number) => {
      const { account, session } = await newSignedInAccount(a, `rvk${n}`, b);
      const created = await send(a, 'POST', '/api/v1/auth/api-keys', { body: { name: 'load' }, session });
      expect(created.status, created.text).toBe(201);
      const { id: keyId, key } = created.json<{ id: number; key: string }>();
      const me = await send(a, 'GET', '/api/v1/auth/me', { session });
      return { n, id: me.json<{ id: number }>().id, session, keyId, key, account };
    };
    const users = await Promise.all(Array.from({ length: 8 }, (_, n) => user(n)));
    // Two more administrators: one is demoted under load, the other not.
    const promoted = await Promise.all(
      [8, 9].map(async (n) => {
        const u = await user(n);
        const changed = await send(a, 'PATCH', `/api/v1/admin/users/${u.id}`, {
          body: { role: 'admin' },
          session: admin,
        });
        expect(changed.status, changed.text).toBe(200);
        return u;
      }),
    );

    const credentials: Credential[] = [
      ...users.flatMap((u) => [
        { name: `user ${u.n} key`, kind: 'key' as const, key: u.key },
        { name: `user ${u.n} session`, kind: 'session' as const, session: u.session },
      ]),
      ...promoted.map((u) => ({ name: `admin ${u.n} session`, kind: 'admin-session' as const, session: u.session })),
    ];
    const named = (name: string) => credentials.find((c) => c.name === name)!;

    const calls: Call[] = [];
    let loading = true;
    const loop = async (w: number) => {
      for (let i = w; loading; i++) {
        const credential = credentials[(i * 7 + w) % credentials.length]!;
        const process = (i + w) % 2;
        const startedAt = Date.now();
        const answer = await call(process === 0 ? a : b, credential);
        calls.push({ credential, process, startedAt, ...answer });
      }
    };
    const load = Promise.all(Array.from({ length: 12 }, (_, w) => loop(w)));

    // The changes, spread over the failure, each through either process.
    const failing = fleet.failDatabase();
    const changes = (async () => {
      const through = (i: number) => (i % 2 === 0 ? a : b);
      for (const [i, u] of users.slice(0, 4).entries()) {
        await sleep(700);
        named(`user ${u.n} key`).refusedFrom = await acknowledged(() =>
          send(through(i), 'DELETE', `/api/v1/auth/api-keys/${u.keyId}`, { session: u.session }),
        );
      }
      for (const [i, u] of users.slice(4, 6).entries()) {
        await sleep(700);
        const at = await acknowledged(() =>
          send(through(i + 1), 'PATCH', `/api/v1/admin/users/${u.id}`, { body: { disabled: true }, session: admin }),
        );
        named(`user ${u.n} key`).refusedFrom = at;
        named(`user ${u.n} session`).refusedFrom = at;
      }
      await sleep(700);
      named(`admin 8 session`).refusedFrom = await acknowledged(() =>
        send(b, 'PATCH', `/api/v1/admin/users/${promoted[0]!.id}`, { body: { role: 'user' }, session: admin }),
      );
    })();
    const fault = await failing;
    await changes;
    await sleep(1_000);
    loading = false;
    await load;

    const let_in = (c: Call) => c.status === 200;
    const breaches = calls
      .filter((c) => c.credential.refusedFrom !== undefined && c.startedAt > c.credential.refusedFrom && let_in(c))
      .map(
        (c) =>
          `${c.credential.name} let in by process ${c.process} ${c.startedAt - c.credential.refusedFrom!} ms after`,
      );
    const unexpected = calls
      .filter((c) => c.status === null || ![200, 401, 403, 503].includes(c.status))
      .map((c) => `${c.credential.name} → ${c.status ?? 'no answer'}: ${c.text.slice(0, 200)}`);
    const malformed = calls
      .filter((c) => c.status !== null && c.status >= 400 && !isDetailBody(c.text))
      .map((c) => `${c.credential.name} → ${c.status}: ${c.text.slice(0, 200)}`);
    const statuses: Record<string, number> = {};
    for (const c of calls) statuses[String(c.status)] = (statuses[String(c.status)] ?? 0) + 1;
    const afterRefusal = calls.filter(
      (c) => c.credential.refusedFrom !== undefined && c.startedAt > c.credential.refusedFrom,
    ).length;
    console.log(
      `${variant.name}: ${calls.length} requests (${JSON.stringify(statuses)}), ${afterRefusal} after a refusal; ` +
        `${changesRefused} changes answered 503 first; ${fault}`,
    );

    expect(calls.length).toBeGreaterThan(200);
    // On SQLite a held write lock refuses the changes, not the reads (WAL): the load goes on.
    expect((statuses['503'] ?? 0) + changesRefused, 'the database failed under the load').toBeGreaterThan(0);
    expect(afterRefusal, 'requests tried the refused credentials').toBeGreaterThan(20);
    expect(breaches, 'credentials let in after their refusal was acknowledged').toEqual([]);
    expect(unexpected, 'answers other than 200, 401, 403 or 503').toEqual([]);
    expect(malformed, 'error answers that are not {detail}').toEqual([]);

    // Refused credentials stay refused, and the untouched ones work again, on both processes.
    await eventually(
      async () => {
        for (const base of [a, b]) {
          for (const credential of credentials) {
            const { status } = await call(base, credential);
            const expected =
              credential.refusedFrom === undefined ? 200 : credential.kind === 'admin-session' ? 403 : 401;
            expect(status, `${credential.name} on ${base}`).toBe(expected);
          }
        }
      },
      { timeoutMs: 15_000, intervalMs: 250 },
    );
  }, 120_000);

  test('one name, or one email, registered at once through both processes makes one account', async () => {
    const [a, b] = fleet.apis.map((p) => p.url) as [string, string];
    const base = newAccount('same');
    const attempts = [
      ...Array.from({ length: 12 }, (_, i) => ({ ...base, email: `n${i}-${base.email}` })),
      ...Array.from({ length: 12 }, (_, i) => ({ ...base, username: `${base.username}e${i}` })),
    ];
    const answers = await Promise.all(
      attempts.map((account, i) => send(i % 2 === 0 ? a : b, 'POST', '/api/v1/auth/register', { body: account })),
    );
    const created = answers.flatMap((answer, i) => (answer.status === 201 ? [attempts[i]!] : []));
    const refused = answers.filter((answer) => answer.status === 409);
    expect(
      answers.filter((answer) => answer.status !== 201 && answer.status !== 409).map((answer) => answer.text),
    ).toEqual([]);
    // The first twelve share the name, the last twelve the email: one of each is made.
    expect(answers.slice(0, 12).filter((answer) => answer.status === 201)).toHaveLength(1);
    expect(answers.slice(12).filter((answer) => answer.status === 201)).toHaveLength(1);
    expect(refused).toHaveLength(22);
    for (const answer of refused) expect(answer.json<{ detail: string }>().detail).toMatch(/already/);
    // Each account made logs in, on either process.
    for (const account of created) {
      for (const url of [a, b]) {
        const login = await send(url, 'POST', '/api/v1/auth/login', {
          body: { username: account.username, password: account.password },
        });
        expect(login.status, login.text).toBe(200);
      }
    }
  });
});
