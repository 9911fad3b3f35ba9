/**
 * Executions end to end in one process (role `all`: API, executor and the embedded bus): a
 * script's output and result come back; an endless loop ends as `timed_out` within its deadline
 * plus a margin; a memory bomb ends as `failed`; the worker still runs the next script; only the
 * owner (or an admin) reads an execution; the list is the caller's own, newest first, paged.
 */
import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { jsonPost, type Session, signUp } from '../helpers/auth.js';
import { BACKENDS } from '../helpers/backends.js';
import { expectError, nextLink } from '../helpers/http.js';
import { type ExecutionBody, finished, submitRequest } from './execution-client.js';

const ADMIN = { username: 'exec_admin', email: 'exec_admin@example.com', password: 'admin password 1' };
const ENV = {
  EVENT_POLL_MS: '50',
  EVENT_LEASE_MS: '2000',
  SANDBOX_MEMORY_MB: '32',
  // The memory bombs must reach their cap before their deadline whatever else the machine runs:
  // at the default nice value (10) a bomb gets about a tenth of a busy core, and in a full CI run
  // the memory-bomb case took 11.4 s (4.3 s at 0) for bombs whose deadline is 10 s. The threads'
  // priority has tests of its own (test/contract/sandbox.contract.test.ts, worker-takeover).
  SANDBOX_NICE: '0',
};
/** What the watchdog and the bookkeeping may add to a deadline. */
const DEADLINE_MARGIN_MS = 2000;

/** Submits a script: 202 with `Location`; its execution id. */
async function submit(app: FastifyInstance, session: Session, script: string, timeoutMs?: number): Promise<string> {
  const response = await submitRequest(app, session, script, timeoutMs);
  expect(response.statusCode, response.body).toBe(202);
  const { execution_id: id } = response.json<{ execution_id: string }>();
  expect(response.headers.location).toBe(`/api/v1/executions/${id}`);
  return id;
}

function read(app: FastifyInstance, session: Session | undefined, id: string) {
  return app.inject({
    method: 'GET',
    url: `/api/v1/executions/${id}`,
    headers: session ? { cookie: session.cookie } : {},
  });
}

describe.each(BACKENDS)('executions on $name', (backend) => {
  const t = useTestApp(backend, ENV, { accounts: true, admin: ADMIN });
  const owner = t.user('exo');
  const other = t.user('exx');
  const admin = t.admin;

  it.skipIf(!backend.available)("a script's output and result come back", async () => {
    const script = 'console.log("hello", 1, {a: 2}); console.error("oops"); [1, 2].map(x => x * 21)';
    const id = await submit(t.app, owner, script);
    const body = await finished(t.app, owner, id);
    expect(body).toMatchObject({
      id,
      status: 'completed',
      language: 'javascript',
      script,
      timeout_ms: 5000,
      output: 'hello 1 {"a":2}\noops\n',
      result: [21, 42],
      error: null,
    });
    expect(body).not.toHaveProperty('user_id');
    expect(body.duration_ms).toBeGreaterThanOrEqual(0);
    expect(body.started_at).not.toBeNull();
    expect(Date.parse(body.finished_at!)).toBeGreaterThanOrEqual(Date.parse(body.started_at!));
    expect(Date.parse(body.started_at!)).toBeGreaterThanOrEqual(Date.parse(body.created_at));
  });

  it.skipIf(!backend.available)('an async script settles; a thrown error ends as failed with its message', async () => {
    const asyncId = await submit(
      t.app,
      owner,
      '(async () => { await null; console.log("later"); return {ok: true}; })()',
    );
    const thrownId = await submit(t.app, owner, 'throw new TypeError("bad input")');
    expect(await finished(t.app, owner, asyncId)).toMatchObject({
      status: 'completed',
      output: 'later\n',
      result: { ok: true },
    });
    expect(await finished(t.app, owner, thrownId)).toMatchObject({
      status: 'failed',
      error: 'TypeError: bad input',
      result: null,
    });
  });

  it.skipIf(!backend.available)(
    'an endless loop ends as timed_out within its deadline plus a small margin',
    async () => {
      const timeoutMs = 500;
      const id = await submit(t.app, owner, 'while (true) {}', timeoutMs);
      const body = await finished(t.app, owner, id);
      expect(body).toMatchObject({ status: 'timed_out', result: null });
      expect(body.error).toMatch(/timed out/i);
      expect(body.duration_ms).toBeGreaterThanOrEqual(timeoutMs);
      expect(body.duration_ms).toBeLessThan(timeoutMs + DEADLINE_MARGIN_MS);
      const ran = Date.parse(body.finished_at!) - Date.parse(body.started_at!);
      expect(ran).toBeLessThan(timeoutMs + DEADLINE_MARGIN_MS);
    },
  );

  it.skipIf(!backend.available)(
    'a memory bomb ends as failed, and the worker then still runs the next script',
    async () => {
      const bomb = await submit(t.app, owner, 'const a = []; while (true) a.push("x".repeat(1 << 16));', 10_000);
      const arrays = await submit(
        t.app,
        owner,
        'const a = []; for (let i = 0; ; i++) a.push(new Array(10000).fill(i));',
        10_000,
      );
      const next = await submit(t.app, owner, 'console.log("still here"); 1 + 1');
      const bombed = await finished(t.app, owner, bomb);
      expect(bombed.status).toBe('failed');
      expect(bombed.error).toMatch(/memory/i);
      expect((await finished(t.app, owner, arrays)).status).toBe('failed');
      expect(await finished(t.app, owner, next)).toMatchObject({
        status: 'completed',
        output: 'still here\n',
        result: 2,
      });
    },
  );

  it.skipIf(!backend.available)('after an endless loop the worker still runs the next script', async () => {
    const loop = await submit(t.app, owner, 'for (;;) {}', 300);
    const next = await submit(t.app, owner, '"next"');
    expect((await finished(t.app, owner, loop)).status).toBe('timed_out');
    expect(await finished(t.app, owner, next)).toMatchObject({ status: 'completed', result: 'next' });
  });

  describe('GET /api/v1/executions/{id}', () => {
    it.skipIf(!backend.available)('another user cannot read the execution: 404, as for a missing one', async () => {
      const id = await submit(t.app, owner, '6 * 7');
      await finished(t.app, owner, id);
      expectError(await read(t.app, other, id), 404, 'Execution not found');
      expectError(await read(t.app, other, '01900000-0000-7000-8000-000000000000'), 404, 'Execution not found');
    });

    it.skipIf(!backend.available)("an admin reads anyone's execution", async () => {
      const id = await submit(t.app, owner, '6 * 7');
      await finished(t.app, owner, id);
      const response = await read(t.app, admin, id);
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toMatchObject({ id, status: 'completed', result: 42 });
    });

    it.skipIf(!backend.available)('401 without a session', async () => {
      const id = await submit(t.app, owner, '1');
      expectError(await read(t.app, undefined, id), 401);
      expectError(
        await t.app.inject({ method: 'GET', url: `/api/v1/executions/${id}`, headers: { cookie: 'access_token=bad' } }),
        401,
      );
    });

    it.skipIf(!backend.available)('is queued or running before it ends', async () => {
      // A long-ish script after another keeps the first observation before the end.
      const id = await submit(t.app, owner, 'let n = 0; for (let i = 0; i < 1e5; i++) n += i; n');
      const first = await read(t.app, owner, id);
      expect(first.statusCode, first.body).toBe(200);
      expect(['queued', 'running', 'completed']).toContain(first.json<ExecutionBody>().status);
      expect((await finished(t.app, owner, id)).result).toBe(4999950000);
    });
  });

  describe('GET /api/v1/executions', () => {
    const list = (session: Session | undefined, query = '') =>
      t.app.inject({
        method: 'GET',
        url: `/api/v1/executions${query}`,
        headers: session ? { cookie: session.cookie } : {},
      });

    it.skipIf(!backend.available)("the caller's own only, newest first, paged with limit/before and Link", async () => {
      const mine = (await signUp(t.app, 'exl')).session;
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push(await submit(t.app, mine, `${i}`));
      const othersId = await submit(t.app, other, '"not yours"');
      const newestFirst = [...ids].reverse();

      const all = await list(mine);
      expect(all.statusCode, all.body).toBe(200);
      expect(all.json<ExecutionBody[]>().map((e) => e.id)).toEqual(newestFirst);
      expect(all.json<ExecutionBody[]>().map((e) => e.id)).not.toContain(othersId);
      expect(all.headers.link).toBeUndefined();
      const createdAt = all.json<ExecutionBody[]>().map((e) => Date.parse(e.created_at));
      expect([...createdAt].sort((a, b) => b - a)).toEqual(createdAt);

      const seen: string[] = [];
      let url: string | undefined = '/api/v1/executions?limit=2';
      const pages: number[] = [];
      while (url) {
        const page = await t.app.inject({ method: 'GET', url, headers: { cookie: mine.cookie } });
        expect(page.statusCode, page.body).toBe(200);
        const items = page.json<ExecutionBody[]>();
        pages.push(items.length);
        seen.push(...items.map((e) => e.id));
        url = nextLink(page);
        if (url) expect(url).toBe(`/api/v1/executions?limit=2&before=${items[items.length - 1]!.id}`);
      }
      expect(pages).toEqual([2, 2, 1]);
      expect(seen).toEqual(newestFirst);

      // Exactly a page's worth: no Link.
      const exact = await list(mine, '?limit=5');
      expect(exact.json<ExecutionBody[]>()).toHaveLength(5);
      expect(exact.headers.link).toBeUndefined();
      // `before` the oldest: empty.
      const none = await list(mine, `?before=${ids[0]}`);
      expect(none.statusCode).toBe(200);
      expect(none.json()).toEqual([]);

      // The other user sees theirs, not these.
      const theirs = (await list(other)).json<ExecutionBody[]>().map((e) => e.id);
      expect(theirs).toContain(othersId);
      for (const id of ids) expect(theirs).not.toContain(id);
    });

    it.skipIf(!backend.available)('401 without a session; 422 for a bad limit', async () => {
      expectError(await list(undefined), 401);
      for (const query of ['?limit=0', '?limit=101', '?limit=x', '?limit=1.5', '?sort=asc']) {
        const response = await list(owner, query);
        expect(response.statusCode, `${query}: ${response.body}`).toBe(422);
        expectError(response, 422);
      }
    });
  });

  it.skipIf(!backend.available)(
    'POST /execute needs no CSRF token (outside /api/) but does need a session',
    async () => {
      expectError(await jsonPost(t.app, '/execute', { language: 'javascript', script: '1' }), 401);
      const response = await jsonPost(
        t.app,
        '/execute',
        { language: 'javascript', script: '1' },
        { cookie: owner.cookie },
      );
      expect(response.statusCode, response.body).toBe(202);
    },
  );
});
