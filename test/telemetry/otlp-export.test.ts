/**
 * The built service, started as `npm start` starts it (`--import ./dist/instrumentation.js`),
 * against a real OTLP/HTTP receiver on 127.0.0.1: what spec §6.3's settings do end to end.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqlite, type TestDatabase } from '../helpers/backends.js';
import { codeMaker, newMapping } from '../helpers/http.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';

interface OtlpSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  readonly kind: number;
  readonly attributes: readonly { key: string; value: Record<string, unknown> }[];
  readonly service: string;
}

const SPAN_KIND_SERVER = 2;
const SPAN_KIND_CLIENT = 3;
const nextCode = codeMaker('otlp');

/** A bare OTLP/HTTP (JSON) trace receiver: keeps every span posted to /v1/traces. */
class Receiver {
  readonly spans: OtlpSpan[] = [];
  posts = 0;
  private readonly server = http.createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      if (request.method === 'POST' && request.url === '/v1/traces') {
        this.posts++;
        this.collect(JSON.parse(body));
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } else {
        response.writeHead(404).end();
      }
    });
  });

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  listen(): Promise<void> {
    return new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  clear(): void {
    this.spans.length = 0;
    this.posts = 0;
  }

  private collect(payload: {
    resourceSpans: {
      resource: { attributes: OtlpSpan['attributes'] };
      scopeSpans: { spans: Omit<OtlpSpan, 'service'>[] }[];
    }[];
  }): void {
    for (const resourceSpans of payload.resourceSpans) {
      const service = String(
        resourceSpans.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue ?? '',
      );
      for (const scope of resourceSpans.scopeSpans)
        for (const span of scope.spans) this.spans.push({ ...span, service });
    }
  }
}

const attribute = (span: OtlpSpan, key: string) => {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value === undefined ? undefined : Object.values(value)[0];
};

describe('OTLP/HTTP export from the built service', async () => {
  const receiver = new Receiver();
  const withRedis = await redisAvailable();
  const redisPrefix = uniqueRedisPrefix('otlp');
  let database: TestDatabase;

  beforeAll(async () => {
    await receiver.listen();
    database = await sqlite.create();
  });

  afterAll(async () => {
    await receiver.close();
    await database.drop();
    if (withRedis) await deleteRedisKeys(redisPrefix);
  });

  /** Runs the service with `env`, sends a few requests, stops it (which flushes its spans). */
  async function exercise(env: Record<string, string>): Promise<{ output: string; code: string }> {
    receiver.clear();
    const server: ServerProcess = await startServer({ DATABASE_URL: database.databaseUrl, ...env });
    const mapping = newMapping(nextCode);
    try {
      const created = await fetch(`${server.url}/shorten`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(mapping),
      });
      expect(created.status, await created.text()).toBe(201);
      const resolved = await fetch(`${server.url}/${mapping.code}`, {
        redirect: 'manual',
        headers: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
      });
      expect(resolved.status).toBe(302);
    } finally {
      expect(await server.stop('SIGTERM')).toBe(0);
    }
    return { output: server.output(), code: mapping.code };
  }

  it('exports server spans with their database (and Redis) spans as children', async () => {
    const { code } = await exercise({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_SERVICE_NAME: 'urlshortener-otlp-test',
      TRACING_SAMPLING_RATE: '1',
      ...(withRedis ? { REDIS_URL, REDIS_KEY_PREFIX: redisPrefix } : {}),
    });
    expect(receiver.posts).toBeGreaterThan(0);
    const shorten = receiver.spans.find((s) => s.name === 'POST /shorten');
    expect(shorten, receiver.spans.map((s) => s.name).join(', ')).toBeDefined();
    expect(shorten!.kind).toBe(SPAN_KIND_SERVER);
    expect(shorten!.service).toBe('urlshortener-otlp-test');
    expect(attribute(shorten!, 'http.route')).toBe('/shorten');
    expect(attribute(shorten!, 'ratelimit.allowed')).toBe(true);

    const children = receiver.spans.filter((s) => s.parentSpanId === shorten!.spanId);
    const insert = children.find((s) => s.name === 'INSERT url_mappings');
    expect(insert, children.map((s) => s.name).join(', ')).toBeDefined();
    expect(insert!.traceId).toBe(shorten!.traceId);
    expect(attribute(insert!, 'db.system.name')).toBe('sqlite');
    if (withRedis) {
      // The rate limiter's script, traced by the ioredis instrumentation through the ESM hook.
      const redis = children.find((s) => attribute(s, 'db.system.name') === 'redis');
      expect(redis, children.map((s) => s.name).join(', ')).toBeDefined();
      expect(redis!.kind).toBe(SPAN_KIND_CLIENT);
    }

    // The redirect continued the caller's trace.
    const redirect = receiver.spans.find((s) => s.name === 'GET /:code');
    expect(redirect).toBeDefined();
    expect(redirect!.traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(redirect!.parentSpanId).toBe('00f067aa0ba902b7');
    expect(attribute(redirect!, 'url.path')).toBe(`/${code}`);
  });

  it('rate 1 without an endpoint: spans are processed (their ids are in the logs), nothing is sent', async () => {
    const { output } = await exercise({ TRACING_SAMPLING_RATE: '1' });
    expect(receiver.posts).toBe(0);
    const line = output.split('\n').find((l) => l.includes('"url":"/shorten"'));
    expect(line, output).toBeDefined();
    expect(JSON.parse(line!)).toMatchObject({
      trace_id: expect.stringMatching(/^[0-9a-f]{32}$/),
      span_id: expect.stringMatching(/^[0-9a-f]{16}$/),
    });
  });

  it('OTEL_SDK_DISABLED=true: no tracing at all, even with an endpoint', async () => {
    const { output } = await exercise({
      OTEL_SDK_DISABLED: 'true',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      TRACING_SAMPLING_RATE: '1',
    });
    expect(receiver.posts).toBe(0);
    expect(output).not.toContain('trace_id');
  });

  it('rate 0: nothing recorded, even for a sampled incoming trace', async () => {
    await exercise({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, TRACING_SAMPLING_RATE: '0' });
    expect(receiver.posts).toBe(0);
    expect(receiver.spans).toEqual([]);
  });
});
