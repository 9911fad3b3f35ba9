/**
 * `POST /execute` (issue #5): 401 without a session, 422 for a body that breaks a rule, and
 * 202 `{execution_id, status: "queued"}` with `Location`; its `execution.requested` event (and
 * the executor's follow-ups) reach `event_store` with the execution id.
 */
import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { useTestApp } from '../helpers/app.js';
import { jsonPost } from '../helpers/auth.js';
import { BACKENDS } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { expectError } from '../helpers/http.js';

const ENV = { EVENT_POLL_MS: '50', EVENT_LEASE_MS: '2000' };

describe.each(BACKENDS)('POST /execute on $name', (backend) => {
  const t = useTestApp(backend, ENV, { accounts: true });
  const session = t.user('exec');

  const execute = (body: unknown, headers: Record<string, string> = { cookie: session.cookie }) =>
    jsonPost(t.app, '/execute', body, headers);

  it.skipIf(!backend.available)('401 without a session', async () => {
    expectError(await execute({ language: 'javascript', script: '1 + 1' }, {}), 401);
    expectError(
      await execute({ language: 'javascript', script: '1 + 1' }, { cookie: 'access_token=not-a-token' }),
      401,
    );
  });

  it.skipIf(!backend.available)('422 for a body that breaks a rule', async () => {
    const cases: [string, unknown, string][] = [
      ['a language other than javascript', { language: 'python', script: 'print(1)' }, 'language'],
      ['no language', { script: '1' }, 'language'],
      ['an empty script', { language: 'javascript', script: '' }, 'script'],
      ['no script', { language: 'javascript' }, 'script'],
      ['a script over 64 KiB', { language: 'javascript', script: 'x'.repeat(64 * 1024 + 1) }, 'script'],
      // 32,769 two-byte characters: under 64 Ki characters, over 64 KiB of UTF-8.
      ['a script over 64 KiB of UTF-8', { language: 'javascript', script: 'é'.repeat(32 * 1024 + 1) }, 'script'],
      ['timeout_ms 0', { language: 'javascript', script: '1', timeout_ms: 0 }, 'timeout_ms'],
      ['timeout_ms over 10000', { language: 'javascript', script: '1', timeout_ms: 10_001 }, 'timeout_ms'],
      ['a fractional timeout_ms', { language: 'javascript', script: '1', timeout_ms: 1.5 }, 'timeout_ms'],
      ['an unknown field', { language: 'javascript', script: '1', priority: 'high' }, 'priority'],
    ];
    for (const [name, body, field] of cases) {
      const response = await execute(body);
      expect(response.statusCode, `${name}: ${response.body}`).toBe(422);
      expectError(response, 422, new RegExp(`\\b${field}\\b`));
    }
    const executions = await (t.service.database.db as unknown as Kysely<{ executions: { id: string } }>)
      .selectFrom('executions')
      .select('id')
      .execute();
    expect(executions).toEqual([]);
  });

  it.skipIf(!backend.available)('the limits themselves are accepted', async () => {
    for (const body of [
      { language: 'javascript', script: 'x'.repeat(64 * 1024) },
      { language: 'javascript', script: '1', timeout_ms: 10_000 },
      { language: 'javascript', script: '1', timeout_ms: 1 },
    ]) {
      const response = await execute(body);
      expect(response.statusCode, response.body).toBe(202);
    }
  });

  it.skipIf(!backend.available)(
    '202 {execution_id, status: "queued"} with Location; its events reach the event store',
    async () => {
      const response = await execute({ language: 'javascript', script: 'console.log("hi"); 6 * 7' });
      expect(response.statusCode, response.body).toBe(202);
      const body = response.json<{ execution_id: string; status: string }>();
      expect(Object.keys(body).sort()).toEqual(['execution_id', 'status']);
      expect(body.status).toBe('queued');
      expect(body.execution_id).toEqual(expect.any(String));
      expect(response.headers.location).toBe(`/api/v1/executions/${body.execution_id}`);

      const status = await eventually(
        async () => {
          const read = await t.app.inject({
            url: response.headers.location as string,
            headers: { cookie: session.cookie },
          });
          expect(read.statusCode, read.body).toBe(200);
          const execution = read.json<{ status: string; result: unknown; output: string }>();
          expect(execution.status).toBe('completed');
          return execution;
        },
        { timeoutMs: 20_000 },
      );
      expect(status.result).toBe(42);
      expect(status.output).toContain('hi');

      const db = t.service.database.db as unknown as Kysely<EventTables>;
      const rows = await eventually(async () => {
        const r = await db
          .selectFrom('event_store')
          .selectAll()
          .where('execution_id', '=', body.execution_id)
          .orderBy('event_id')
          .execute();
        expect(r.map((x) => x.event_type)).toEqual(['execution.requested', 'execution.started', 'execution.completed']);
        return r;
      });
      for (const row of rows) {
        expect(row.topic).toBe('execution_events');
        expect(JSON.parse(row.headers)).toMatchObject({ event_type: row.event_type, service: 'urlshortener' });
      }
      expect(JSON.parse(rows[0]!.payload)).toMatchObject({
        execution_id: body.execution_id,
        language: 'javascript',
        script: 'console.log("hi"); 6 * 7',
      });
    },
  );
});
