/**
 * The built service, started as `npm start` starts it (`--import ./dist/instrumentation.js`),
 * against a real OTLP/HTTP receiver on 127.0.0.1: what spec §6.3's settings do end to end.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqlite, type TestDatabase } from '../helpers/backends.js';
import { codeMaker, fetchShorten, newMapping } from '../helpers/http.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';
import { OtlpReceiver, SPAN_KIND, spanAttribute } from '../helpers/otlp-receiver.js';

const nextCode = codeMaker('otlp');

describe('OTLP/HTTP export from the built service', async () => {
  const receiver = new OtlpReceiver();
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
      const created = await fetchShorten(server.url, mapping);
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
      // REDIS_TIMEOUT_MS: the first decision of a fresh process (its script loaded, the Redis
      // instrumentation's first span) on a CI machine running another test file beside this one
      // can outlast the 500 ms default, and is then admitted without a decision (fail-open, as
      // designed; test/backends/redis-outage.test.ts covers that). This test is about export.
      ...(withRedis ? { REDIS_URL, REDIS_KEY_PREFIX: redisPrefix, REDIS_TIMEOUT_MS: '5000' } : {}),
    });
    expect(receiver.posts).toBeGreaterThan(0);
    const shorten = receiver.spans.find((s) => s.name === 'POST /shorten');
    expect(shorten, receiver.spans.map((s) => s.name).join(', ')).toBeDefined();
    expect(shorten!.kind).toBe(SPAN_KIND.server);
    expect(shorten!.service).toBe('urlshortener-otlp-test');
    expect(spanAttribute(shorten!, 'http.route')).toBe('/shorten');
    expect(spanAttribute(shorten!, 'ratelimit.allowed')).toBe(true);

    const children = receiver.spans.filter((s) => s.parentSpanId === shorten!.spanId);
    const insert = children.find((s) => s.name === 'INSERT url_mappings');
    expect(insert, children.map((s) => s.name).join(', ')).toBeDefined();
    expect(insert!.traceId).toBe(shorten!.traceId);
    expect(spanAttribute(insert!, 'db.system.name')).toBe('sqlite');
    if (withRedis) {
      // The rate limiter's script, traced by the ioredis instrumentation through the ESM hook.
      const redis = children.find((s) => spanAttribute(s, 'db.system.name') === 'redis');
      expect(redis, children.map((s) => s.name).join(', ')).toBeDefined();
      expect(redis!.kind).toBe(SPAN_KIND.client);
    }

    // The redirect continued the caller's trace.
    const redirect = receiver.spans.find((s) => s.name === 'GET /:code');
    expect(redirect).toBeDefined();
    expect(redirect!.traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(redirect!.parentSpanId).toBe('00f067aa0ba902b7');
    expect(spanAttribute(redirect!, 'url.path')).toBe(`/${code}`);
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
