/**
 * What one execution and one user may take (issue #11), on each database: a result or an error
 * of 30 MiB is kept and served cut at 64 KiB, marked as cut, in the row and in its event alike,
 * and a list of such executions stays small (previews); a user with as many executions queued
 * or running as allowed gets 429 `{detail}` for the next, also when many arrive at once, and
 * may submit again once one has ended.
 */
import { type Kysely, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { useTestApp } from '../helpers/app.js';
import { signUp } from '../helpers/auth.js';
import { BACKENDS } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { expectError } from '../helpers/http.js';
import { type ExecutionBody, ENDLESS, finished, submit, submitRequest } from './execution-client.js';

const KIB_64 = 64 * 1024;
const MAX_PENDING = 3;
const ENV = {
  EVENT_POLL_MS: '50',
  EVENT_LEASE_MS: '2000',
  SANDBOX_MEMORY_MB: '128',
  EXECUTION_CONCURRENCY: '2',
  EXECUTION_MAX_THREADS_PER_USER: '2',
  EXECUTION_MAX_PENDING_PER_USER: String(MAX_PENDING),
};

describe.each(BACKENDS)('execution limits on $name', (backend) => {
  const t = useTestApp(backend, ENV, { accounts: true });

  it.skipIf(!backend.available)(
    'a 30 MiB result and a 30 MiB error are kept and served cut at 64 KiB, marked; events and the list stay small',
    async () => {
      const { session } = await signUp(t.app, 'exr');
      const huge = await submit(t.app, session, '"p".repeat(30 * 1024 * 1024)', 10_000);
      const thrown = await submit(t.app, session, 'throw new Error("e".repeat(30 * 1024 * 1024))', 10_000);
      const value = await finished(t.app, session, huge, 30_000);
      expect(value).toMatchObject({ status: 'completed', truncated: true, error: null });
      expect(value.result).toMatch(/^"p{60000,}\n\[result truncated\]$/); // the start of its JSON text
      expect(Buffer.byteLength(value.result as string)).toBeLessThanOrEqual(KIB_64);
      const error = await finished(t.app, session, thrown, 30_000);
      expect(error).toMatchObject({ status: 'failed', truncated: true, result: null });
      expect(error.error).toMatch(/^Error: e{60000,}\n\[error truncated\]$/);
      expect(Buffer.byteLength(error.error!)).toBeLessThanOrEqual(KIB_64);

      // The rows and the events hold the cut values, not 30 MiB each.
      const db = t.service.database.db as unknown as Kysely<EventTables & { executions: { id: string } }>;
      const rowSizes = await db
        .selectFrom('executions')
        .select(['id', sql<number>`length(result)`.as('result'), sql<number>`length(error)`.as('error')])
        .where('id', 'in', [huge, thrown])
        .execute();
      for (const row of rowSizes) expect(Math.max(row.result ?? 0, row.error ?? 0)).toBeLessThanOrEqual(KIB_64 + 16);
      const events = await eventually(async () => {
        const rows = await db
          .selectFrom('event_store')
          .select(['event_type', 'payload'])
          .where('execution_id', 'in', [huge, thrown])
          .where('event_type', 'in', ['execution.completed', 'execution.failed'])
          .execute();
        expect(rows).toHaveLength(2);
        return rows;
      });
      for (const event of events) {
        expect(event.payload.length).toBeLessThan(KIB_64 * 2);
        expect(JSON.parse(event.payload)).toMatchObject({ truncated: true });
      }

      // The list shows previews: a page of such executions is a few KiB, and says they were cut.
      const list = await t.app.inject({ url: '/api/v1/executions', headers: { cookie: session.cookie } });
      expect(list.statusCode, list.body.slice(0, 200)).toBe(200);
      expect(list.body.length).toBeLessThan(8 * 1024);
      const items = list.json<ExecutionBody[]>();
      expect(items.map((e) => e.id)).toEqual([thrown, huge]);
      for (const item of items) expect(item.truncated).toBe(true);
      // A result over the preview shows the start of its JSON text (here that of the cut string).
      expect(items[1]!.result).toMatch(/^"\\"p{1021}\n\[result truncated\]$/);
      expect(items[0]!.error).toMatch(/^Error: e{1017}\n\[error truncated\]$/);
    },
  );

  it.skipIf(!backend.available)(
    'a result within the limits is served whole in the list as in the execution',
    async () => {
      const { session } = await signUp(t.app, 'exs');
      const id = await submit(t.app, session, 'console.log("out"); ({ list: [1, 2, 3], text: "x".repeat(500) })');
      const execution = await finished(t.app, session, id);
      expect(execution).toMatchObject({ status: 'completed', truncated: false, output: 'out\n' });
      const [item] = (await t.app.inject({ url: '/api/v1/executions', headers: { cookie: session.cookie } })).json<
        ExecutionBody[]
      >();
      expect(item).toEqual(execution);
    },
  );

  it.skipIf(!backend.available)(
    `429 {detail} beyond ${MAX_PENDING} queued or running per user, also when many arrive at once; room again once one ends`,
    async () => {
      const { session: alice } = await signUp(t.app, 'exq');
      const { session: bob } = await signUp(t.app, 'exw');
      const timeoutMs = 3000;
      // Ten at once: exactly the limit gets through.
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => submitRequest(t.app, alice, ENDLESS, timeoutMs)),
      );
      const accepted = answers.filter((r) => r.statusCode === 202).map((r) => r.json<{ execution_id: string }>());
      const refused = answers.filter((r) => r.statusCode !== 202);
      expect(accepted).toHaveLength(MAX_PENDING);
      expect(refused).toHaveLength(10 - MAX_PENDING);
      for (const response of refused) expectError(response, 429, /at most 3/);
      expectError(await submitRequest(t.app, alice, '1'), 429);
      // Another user is not affected.
      expect((await finished(t.app, bob, await submit(t.app, bob, '"mine"'))).result).toBe('mine');
      // Once one of Alice's has ended, she may submit one more.
      await finished(t.app, alice, accepted[0]!.execution_id, 30_000);
      const more = await eventually(async () => {
        const response = await submitRequest(t.app, alice, '"again"');
        expect(response.statusCode, response.body).toBe(202);
        return response.json<{ execution_id: string }>().execution_id;
      });
      for (const { execution_id: id } of accepted) await finished(t.app, alice, id, 30_000);
      expect((await finished(t.app, alice, more)).result).toBe('again');
    },
  );
});
