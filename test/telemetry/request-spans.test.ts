/**
 * Spans of real requests, recorded in memory. Tracing is process-wide (it patches node:http and
 * listens to fetch), so it starts here, first, and this file runs in a process of its own.
 */
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind, trace } from '@opentelemetry/api';
import { startTracing } from '../../src/adapters/telemetry/tracing.js';
import { traceLogFields } from '../../src/adapters/telemetry/span-attributes.js';
import { testConfig } from '../helpers/backends.js';

const exporter = new InMemorySpanExporter();
const TRACING_ENV = { TRACING_SAMPLING_RATE: '1' };
const tracing = startTracing(testConfig('sqlite::memory:', TRACING_ENV).tracing, { exporter });

import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { compose, type Service } from '../../src/composition/compose.js';
import { BACKENDS, type TestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, newMapping } from '../helpers/http.js';

const nextCode = codeMaker('trc');

interface RawResponse {
  readonly status: number;
  readonly body: string;
}

/**
 * One HTTP/1.1 request over a bare socket: no client instrumentation is involved, so the
 * server span's parent is exactly what the request's headers say.
 */
function rawRequest(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('error', reject);
    socket.on('end', () => {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(received)?.[1]);
      resolve({ status, body: received.slice(received.indexOf('\r\n\r\n') + 4) });
    });
    const lines = [`${method} ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Connection: close'];
    for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
    if (body !== undefined) lines.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`);
    // Not end(): a half-closed socket may be closed by the server before it answers.
    // `Connection: close` makes the server end it once the answer is sent.
    socket.write(`${lines.join('\r\n')}\r\n\r\n${body ?? ''}`);
  });
}

const spans = () => exporter.getFinishedSpans();
const childrenOf = (parent: ReadableSpan) =>
  spans().filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId);

/** The finished server span of the request to `path`. */
function serverSpanFor(path: string, method = 'GET'): Promise<ReadableSpan> {
  return eventually(() => {
    const span = spans().find(
      (s) =>
        s.kind === SpanKind.SERVER &&
        s.attributes['url.path'] === path &&
        s.attributes['http.request.method'] === method,
    );
    if (!span) throw new Error(`no server span for ${method} ${path} yet`);
    return span;
  });
}

afterAll(async () => {
  await tracing.shutdown();
});

// The redirect fast path (REDIRECT_FAST_PATH) hands a sampled request to its route: both ways, the same spans.
for (const [backend, fastPath] of BACKENDS.flatMap((b) => [[b, 'true'] as const, [b, 'false'] as const])) {
  describe(`request spans on ${backend.name} (REDIRECT_FAST_PATH=${fastPath})`, () => {
    let database: TestDatabase;
    let service: Service;
    let port: number;

    beforeAll(async () => {
      if (!backend.available) return;
      database = await backend.create();
      service = await compose(
        testConfig(database.databaseUrl, { ...TRACING_ENV, RATE_LIMIT_ENABLED: 'true', REDIRECT_FAST_PATH: fastPath }),
        { logger: false },
      );
      await service.app.listen({ host: '127.0.0.1', port: 0 });
      port = (service.app.server.address() as AddressInfo).port;
    });

    afterAll(async () => {
      if (!backend.available) return;
      await service.close();
      await database.drop();
    });

    beforeEach(() => exporter.reset());

    it.skipIf(!backend.available)(
      'one request: a server span named by route, its SQL statements as children',
      async () => {
        const body = newMapping(nextCode);
        const created = await rawRequest(port, 'POST', '/shorten', {}, JSON.stringify(body));
        expect(created.status, created.body).toBe(201);

        const server = await serverSpanFor('/shorten', 'POST');
        expect(server.name).toBe('POST /shorten');
        expect(server.attributes).toMatchObject({
          'http.route': '/shorten',
          'http.request.method': 'POST',
          'http.response.status_code': 201,
          'url.scheme': 'http',
          'url.path': '/shorten',
          'server.address': '127.0.0.1',
          'server.port': port,
          'client.address': '127.0.0.1',
          'ratelimit.allowed': true,
          'ratelimit.limit': 60,
          'ratelimit.remaining': 59,
          'ratelimit.algorithm': 'token_bucket',
        });
        expect(server.parentSpanContext).toBeUndefined();

        const statements = childrenOf(server);
        const insert = statements.find((s) => s.attributes['db.operation.name'] === 'INSERT');
        expect(insert, statements.map((s) => s.name).join(', ')).toBeDefined();
        expect(insert!.name).toBe('INSERT url_mappings');
        expect(insert!.kind).toBe(SpanKind.CLIENT);
        expect(insert!.spanContext().traceId).toBe(server.spanContext().traceId);
        expect(insert!.attributes).toMatchObject({
          'db.system.name': backend.name === 'postgres' ? 'postgresql' : 'sqlite',
          'db.operation.name': 'INSERT',
          'db.collection.name': 'url_mappings',
          'db.query.summary': 'INSERT url_mappings',
        });
        expect(String(insert!.attributes['db.query.text'])).toMatch(/^insert into "url_mappings"/);
        expect(String(insert!.attributes['db.query.text'])).not.toContain(body.url); // values stay out

        // A redirect that misses the cache reads the mapping: GET /:code with a SELECT below it.
        const resolved = await rawRequest(port, 'GET', `/${body.code}`);
        expect(resolved.status).toBe(302);
        const redirect = await serverSpanFor(`/${body.code}`);
        expect(redirect.name).toBe('GET /:code');
        // The same attributes whether the fast path (which starts the span itself) or the route answers.
        expect(redirect.attributes).toMatchObject({
          'http.route': '/:code',
          'http.request.method': 'GET',
          'http.response.status_code': 302,
          'url.scheme': 'http',
          'url.path': `/${body.code}`,
          'server.address': '127.0.0.1',
          'server.port': port,
          'client.address': '127.0.0.1',
          'network.peer.address': '127.0.0.1',
          'network.protocol.version': '1.1',
          'ratelimit.allowed': true,
          'ratelimit.policy': 'redirects',
          'ratelimit.algorithm': 'token_bucket',
        });
        expect(redirect.parentSpanContext).toBeUndefined();
        expect(redirect.ended).toBe(true);
        expect(spans().filter((s) => s.name === 'GET /:code')).toHaveLength(1);
        expect(childrenOf(redirect).map((s) => s.name)).toContain('SELECT url_mappings');
        const select = childrenOf(redirect).find((s) => s.name === 'SELECT url_mappings')!;
        expect(select.attributes).toMatchObject({
          'db.system.name': backend.name === 'postgres' ? 'postgresql' : 'sqlite',
          'db.operation.name': 'SELECT',
          'db.collection.name': 'url_mappings',
          'db.query.summary': 'SELECT url_mappings',
          'db.response.returned_rows': 1,
        });
        expect(String(select.attributes['db.query.text'])).toMatch(/^select .*url_mappings.* where .*code.* = \?|\$1/i);
        // A code nobody stored: the route's 404, under the same span.
        const missing = await rawRequest(port, 'GET', '/nobody0sto');
        expect(missing.status).toBe(404);
        const notFound = await serverSpanFor('/nobody0sto');
        expect(notFound.name).toBe('GET /:code');
        expect(notFound.attributes).toMatchObject({
          'http.route': '/:code',
          'http.response.status_code': 404,
          'ratelimit.policy': 'redirects',
        });
      },
    );

    it.skipIf(!backend.available)('a failed statement is a span with the error', async () => {
      const body = newMapping(nextCode);
      expect((await rawRequest(port, 'POST', '/shorten', {}, JSON.stringify(body))).status).toBe(201);
      const duplicate = await rawRequest(port, 'POST', '/shorten', { 'x-attempt': 'duplicate' }, JSON.stringify(body));
      expect(duplicate.status).toBe(409);
      const server = await eventually(() => {
        const found = spans().filter(
          (s) => s.name === 'POST /shorten' && s.attributes['http.response.status_code'] === 409,
        );
        if (found.length === 0) throw new Error('not yet');
        return found[found.length - 1]!;
      });
      const failed = childrenOf(server).find((s) => s.attributes['error.type'] !== undefined);
      expect(
        failed,
        childrenOf(server)
          .map((s) => s.name)
          .join(', '),
      ).toBeDefined();
      expect(failed!.attributes['error.type']).toBe(backend.name === 'postgres' ? '23505' : 'SQLITE_CONSTRAINT_UNIQUE');
      expect(failed!.status.code).toBe(2); // ERROR
    });
  });
}

/** A service on a SQLite database of its own, with `env` over the tracing settings, listening on a free port. */
async function listeningOnSqlite(env: Record<string, string>) {
  const database = await BACKENDS.find((b) => b.name === 'sqlite')!.create();
  const service = await compose(testConfig(database.databaseUrl, { ...TRACING_ENV, ...env }), { logger: false });
  await service.app.listen({ host: '127.0.0.1', port: 0 });
  return { database, service, port: (service.app.server.address() as AddressInfo).port };
}

// Behind a trusted proxy the fast path hands a sampled redirect to the route, which reads X-Forwarded-*.
describe('a sampled redirect behind a trusted proxy (TRUST_PROXY=true)', () => {
  let service: Service;
  let database: TestDatabase;
  let port: number;

  beforeAll(async () => {
    ({ service, database, port } = await listeningOnSqlite({ TRUST_PROXY: 'true' }));
  });

  afterAll(async () => {
    exporter.reset(); // its spans are not the next suite's
    await service.close();
    await database.drop();
  });

  beforeEach(() => exporter.reset());

  it("takes the scheme and host the proxy forwarded, as the route's span does", async () => {
    const body = newMapping(nextCode);
    expect((await rawRequest(port, 'POST', '/shorten', {}, JSON.stringify(body))).status).toBe(201);
    const forwarded = { 'X-Forwarded-Host': 'short.example', 'X-Forwarded-Proto': 'https' };
    expect((await rawRequest(port, 'GET', `/${body.code}`, forwarded)).status).toBe(302);
    const redirect = await serverSpanFor(`/${body.code}`);
    expect(redirect.name).toBe('GET /:code');
    expect(redirect.attributes).toMatchObject({
      'http.route': '/:code',
      'http.response.status_code': 302,
      'url.scheme': 'https',
      'server.address': 'short.example',
    });
    expect(spans().filter((s) => s.name === 'GET /:code')).toHaveLength(1);
  });
});

describe('trace context', () => {
  let service: Service;
  let database: TestDatabase;
  let port: number;

  beforeAll(async () => {
    ({ service, database, port } = await listeningOnSqlite({}));
  });

  afterAll(async () => {
    await service.close();
    await database.drop();
  });

  it('an incoming traceparent becomes the parent of the server span', async () => {
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const parentId = 'b7ad6b7169203331';
    const response = await rawRequest(port, 'GET', '/health?case=valid', {
      traceparent: `00-${traceId}-${parentId}-01`,
    });
    expect(response.status).toBe(200);
    const server = await serverSpanFor('/health');
    expect(server.name).toBe('GET /health');
    expect(server.spanContext().traceId).toBe(traceId);
    expect(server.parentSpanContext?.spanId).toBe(parentId);
    expect(server.parentSpanContext?.isRemote).toBe(true);
  });

  it('(REDIRECT_FAST_PATH on, the default) a redirect with an incoming traceparent: one server span, its child, the clicked code counted once', async () => {
    const traceId = '1bf7651916cd43dd8448eb211c80319c';
    const parentId = 'c7ad6b7169203331';
    const body = newMapping(nextCode);
    expect((await rawRequest(port, 'POST', '/shorten', {}, JSON.stringify(body))).status).toBe(201);
    const response = await rawRequest(port, 'GET', `/${body.code}`, { traceparent: `00-${traceId}-${parentId}-01` });
    expect(response.status).toBe(302);
    const server = await serverSpanFor(`/${body.code}`);
    expect(server.name).toBe('GET /:code');
    expect(server.spanContext().traceId).toBe(traceId);
    expect(server.parentSpanContext?.spanId).toBe(parentId);
    expect(spans().filter((s) => s.name === 'GET /:code')).toHaveLength(1);
    const listed = (await service.app.inject({ method: 'GET', url: '/urls' })).json<
      { code: string; click_count: number }[]
    >();
    expect(listed.find((m) => m.code === body.code)?.click_count).toBe(1);
  });

  const invalid = {
    uppercase: '00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01',
    'all-zero-trace-id': '00-00000000000000000000000000000000-b7ad6b7169203331-01',
    'all-zero-parent-id': '00-0af7651916cd43dd8448eb211c80319d-0000000000000000-01',
    'version-ff': 'ff-0af7651916cd43dd8448eb211c80319e-b7ad6b7169203331-01',
  };
  for (const [name, traceparent] of Object.entries(invalid)) {
    it(`an invalid traceparent (${name}) starts a new trace`, async () => {
      expect((await rawRequest(port, 'GET', `/health/ready?case=${name}`, { traceparent })).status).toBe(200);
      const server = await eventually(() => {
        const span = spans().find((s) => s.kind === SpanKind.SERVER && s.attributes['url.query'] === `case=${name}`);
        if (!span) throw new Error(`no server span for ${name} yet`);
        return span;
      });
      expect(server.parentSpanContext).toBeUndefined();
      const givenTraceId = traceparent.split('-')[1]!.toLowerCase();
      expect(server.spanContext().traceId).not.toBe(givenTraceId);
      expect(server.spanContext().traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(server.spanContext().traceId).not.toBe('0'.repeat(32));
    });
  }

  describe('outgoing calls', () => {
    let target: http.Server;
    let targetUrl: string;
    const received: http.IncomingHttpHeaders[] = [];

    beforeAll(async () => {
      target = http.createServer((request, response) => {
        received.push(request.headers);
        response.end('ok');
      });
      await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
      targetUrl = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
    });

    afterAll(async () => {
      await new Promise((resolve) => target.close(resolve));
    });

    const tracer = trace.getTracer('test');

    for (const client of ['fetch', 'node:http'] as const) {
      it(`${client}: a client span, child of the active span, whose id the traceparent carries`, async () => {
        const path = `/${client === 'fetch' ? 'from-fetch' : 'from-http'}`;
        const parent = await tracer.startActiveSpan(`call with ${client}`, async (span) => {
          if (client === 'fetch') {
            expect(await (await fetch(`${targetUrl}${path}`)).text()).toBe('ok');
          } else {
            await new Promise<void>((resolve, reject) => {
              http.get(`${targetUrl}${path}`, (response) => response.resume().on('end', resolve)).on('error', reject);
            });
          }
          span.end();
          return span;
        });
        const clientSpan = await eventually(() => {
          const found = spans().find(
            (s) => s.kind === SpanKind.CLIENT && s.parentSpanContext?.spanId === parent.spanContext().spanId,
          );
          if (!found) throw new Error('no client span yet');
          return found;
        });
        expect(clientSpan.spanContext().traceId).toBe(parent.spanContext().traceId);
        expect(clientSpan.attributes['http.request.method']).toBe('GET');
        expect(clientSpan.attributes['http.response.status_code']).toBe(200);
        const headers = received[received.length - 1]!;
        expect(headers.traceparent).toBe(`00-${parent.spanContext().traceId}-${clientSpan.spanContext().spanId}-01`);
      });
    }
  });

  it('log lines written inside a span carry its trace and span ids', () => {
    expect(traceLogFields()).toEqual({});
    trace.getTracer('test').startActiveSpan('logging', (span) => {
      expect(traceLogFields()).toEqual({
        trace_id: span.spanContext().traceId,
        span_id: span.spanContext().spanId,
        trace_flags: '01',
      });
      span.end();
    });
  });
});
