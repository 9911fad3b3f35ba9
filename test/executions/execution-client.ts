/** Submitting and reading executions in tests, through `app.inject()` or over HTTP. */
import { expect } from 'vitest';
import { jsonPost, type Session } from '../helpers/auth.js';
import { eventually } from '../helpers/eventually.js';
import type { Injector } from '../helpers/http.js';

export interface ExecutionBody {
  id: string;
  status: string;
  language: string;
  script: string;
  timeout_ms: number;
  output: string;
  result: unknown;
  error: string | null;
  truncated: boolean;
  duration_ms: number | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

export const FINAL = new Set(['completed', 'failed', 'timed_out']);

/** A script that runs until its deadline. */
export const ENDLESS = 'while (true) {}';

export function submitRequest(app: Injector, session: Session, script: string, timeoutMs?: number) {
  return jsonPost(
    app,
    '/execute',
    { language: 'javascript', script, ...(timeoutMs === undefined ? {} : { timeout_ms: timeoutMs }) },
    { cookie: session.cookie },
  );
}

export async function submit(app: Injector, session: Session, script: string, timeoutMs?: number) {
  const response = await submitRequest(app, session, script, timeoutMs);
  expect(response.statusCode, response.body).toBe(202);
  return response.json<{ execution_id: string }>().execution_id;
}

export async function read(app: Injector, session: Session, id: string): Promise<ExecutionBody> {
  const response = await app.inject({
    method: 'GET',
    url: `/api/v1/executions/${id}`,
    headers: { cookie: session.cookie },
  });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<ExecutionBody>();
}

/** Waits until the execution has status `status` (one of them), and returns it. */
export function reaches(
  app: Injector,
  session: Session,
  id: string,
  status: string | ((status: string) => boolean),
  timeoutMs = 20_000,
): Promise<ExecutionBody> {
  const wanted = typeof status === 'string' ? (s: string) => s === status : status;
  return eventually(
    async () => {
      const body = await read(app, session, id);
      if (!wanted(body.status)) throw new Error(`execution ${id} is ${body.status}`);
      return body;
    },
    { timeoutMs, intervalMs: 50 },
  );
}

export const finished = (app: Injector, session: Session, id: string, timeoutMs = 20_000) =>
  reaches(app, session, id, (s) => FINAL.has(s), timeoutMs);
