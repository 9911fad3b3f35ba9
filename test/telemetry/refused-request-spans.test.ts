/**
 * Requests refused by authentication or CSRF (401, 403) get what every request gets: a server
 * span and a rate-limit decision (spec §6.2 rules 1 and 9; design "Rate limiting": every answer on
 * a limited route carries the headers). Issue 16. Recorded with an in-memory span exporter;
 * tracing is process-wide, so it starts here, first, and this file runs in a process of its own.
 */
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind } from '@opentelemetry/api';
import { startTracing } from '../../src/adapters/telemetry/tracing.js';
import { testConfig } from '../helpers/backends.js';

const exporter = new InMemorySpanExporter();
const TRACING_ENV = { TRACING_SAMPLING_RATE: '1', RATE_LIMIT_ENABLED: 'true' };
const tracing = startTracing(testConfig('sqlite::memory:', TRACING_ENV).tracing, { exporter });

import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { useTestApps } from '../helpers/app.js';
import { signUp } from '../helpers/auth.js';
import { sqlite } from '../helpers/backends.js';

const startApp = useTestApps('each');

afterAll(async () => {
  await tracing.shutdown();
});
beforeEach(() => exporter.reset());

const serverSpans = (name: string) =>
  exporter.getFinishedSpans().filter((s: ReadableSpan) => s.kind === SpanKind.SERVER && s.name === name);

function expectHeaders(response: LightMyRequestResponse, policy: string, quota: number, remaining: number) {
  expect(response.headers['ratelimit-policy']).toBe(`"${policy}";q=${quota};w=60`);
  expect(response.headers.ratelimit).toMatch(new RegExp(`^"${policy}";r=${remaining};t=\\d+$`));
}

describe('requests refused by authentication or CSRF', () => {
  it('ten anonymous GETs to a signed-in route: ten 401s, each with its span, its decision and the headers', async () => {
    const { app } = await startApp(sqlite, TRACING_ENV, { accounts: true });
    for (let i = 0; i < 10; i++) {
      const response = await app.inject({ method: 'GET', url: '/api/v1/auth/me' });
      expect(response.statusCode, response.body).toBe(401);
      expectHeaders(response, 'default', 600, 599 - i);
    }
    const spans = serverSpans('GET /api/v1/auth/me');
    expect(spans).toHaveLength(10);
    spans.forEach((span, i) =>
      expect(span.attributes).toMatchObject({
        'http.route': '/api/v1/auth/me',
        'http.response.status_code': 401,
        'ratelimit.allowed': true,
        'ratelimit.limit': 600,
        'ratelimit.remaining': 599 - i,
        'ratelimit.algorithm': 'token_bucket',
        'ratelimit.policy': 'default',
      }),
    );
  });

  it('refused requests count: past the limit, the answer is 429 and the span says so', async () => {
    const { app } = await startApp(sqlite, { ...TRACING_ENV, RATE_LIMIT_DEFAULT_LIMIT: '3' }, { accounts: true });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const response = await app.inject({ method: 'GET', url: '/api/v1/auth/me' });
      statuses.push(response.statusCode);
      expect(response.headers.ratelimit).toBeDefined();
    }
    expect(statuses).toEqual([401, 401, 401, 429, 429]);
    const spans = serverSpans('GET /api/v1/auth/me');
    expect(spans.map((s) => [s.attributes['http.response.status_code'], s.attributes['ratelimit.allowed']])).toEqual([
      [401, true],
      [401, true],
      [401, true],
      [429, false],
      [429, false],
    ]);
  });

  it('a CSRF failure (403) has its span and its decision', async () => {
    const { app } = await startApp(sqlite, TRACING_ENV, { accounts: true });
    const { session } = await signUp(app, 'rcsrf');
    exporter.reset();
    const response = await app.inject({
      method: 'POST',
      url: '/api/v1/notifications/channels',
      headers: { cookie: session.cookie, 'content-type': 'application/json' },
      payload: JSON.stringify({ kind: 'webhook', url: 'https://example.com/hook' }),
    });
    expect(response.statusCode, response.body).toBe(403);
    expect(response.json()).toEqual({ detail: 'CSRF token missing from X-CSRF-Token header' });
    expectHeaders(response, 'writes', 60, 59);
    const [span] = serverSpans('POST /api/v1/notifications/channels');
    expect(span?.attributes).toMatchObject({
      'http.response.status_code': 403,
      'ratelimit.allowed': true,
      'ratelimit.policy': 'writes',
    });
  });

  it('a signed-in user refused an admin route (403) has its span and a decision keyed by that user', async () => {
    const { app } = await startApp(sqlite, { ...TRACING_ENV, RATE_LIMIT_DEFAULT_LIMIT: '2' }, { accounts: true });
    const { session } = await signUp(app, 'radm');
    exporter.reset();
    const settings = () =>
      app.inject({ method: 'GET', url: '/api/v1/admin/settings', headers: { cookie: session.cookie } });
    expect((await settings()).statusCode).toBe(403);
    expect((await settings()).statusCode).toBe(403);
    expect((await settings()).statusCode).toBe(429);
    // The user's quota, not the address's: an anonymous request from the same address is still admitted.
    expect((await app.inject({ method: 'GET', url: '/api/v1/auth/me' })).statusCode).toBe(401);
    const spans = serverSpans('GET /api/v1/admin/settings');
    expect(spans.map((s) => s.attributes['http.response.status_code'])).toEqual([403, 403, 429]);
    expect(spans[0]!.attributes).toMatchObject({ 'ratelimit.remaining': 1, 'ratelimit.policy': 'default' });
  });
});
