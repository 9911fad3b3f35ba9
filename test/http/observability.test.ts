import net from 'node:net';
import { describe, expect, it } from 'vitest';
import type { Service } from '../../src/composition/compose.js';
import { useTestApps } from '../helpers/app.js';
import { sqlite } from '../helpers/backends.js';
import { codeMaker, createMapping, newMapping } from '../helpers/http.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';

const nextCode = codeMaker('obs');
const startApp = useTestApps('each');
const start = async (env: Record<string, string> = {}): Promise<Service> => (await startApp(sqlite, env)).service;

/** The Prometheus exposition's sample lines named `name`. */
async function samples(service: Service, name: string): Promise<string[]> {
  const response = await service.app.inject({ method: 'GET', url: '/metrics' });
  expect(response.statusCode).toBe(200);
  return response.body.split('\n').filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `));
}

describe('GET /metrics', () => {
  it('counts requests and their latency by method, route pattern and status, never by raw URL', async () => {
    const service = await start();
    const mapping = await createMapping(service.app, newMapping(nextCode));
    for (let i = 0; i < 3; i++)
      expect((await service.app.inject({ method: 'GET', url: `/${mapping.code}` })).statusCode).toBe(302);
    expect((await service.app.inject({ method: 'GET', url: '/nosuch99' })).statusCode).toBe(404);
    expect((await service.app.inject({ method: 'GET', url: '/no/such/path' })).statusCode).toBe(404);

    const counts = await samples(service, 'http_requests_total');
    expect(counts).toContain('http_requests_total{method="POST",route="/shorten",status_code="201"} 1');
    expect(counts).toContain('http_requests_total{method="GET",route="/:code",status_code="302"} 3');
    expect(counts).toContain('http_requests_total{method="GET",route="/:code",status_code="404"} 1');
    expect(counts).toContain('http_requests_total{method="GET",route="not_found",status_code="404"} 1');
    expect(counts.join('\n')).not.toContain(mapping.code);
    expect(counts.join('\n')).not.toContain('/no/such/path');

    const latency = await samples(service, 'http_request_duration_seconds_count');
    expect(latency).toContain('http_request_duration_seconds_count{method="GET",route="/:code",status_code="302"} 3');
    const buckets = await samples(service, 'http_request_duration_seconds_bucket');
    expect(buckets.some((l) => l.includes('le="+Inf"') && l.includes('route="/shorten"'))).toBe(true);
  });

  it('counts redirect cache lookups: hits and misses', async () => {
    const service = await start();
    const mapping = await createMapping(service.app, newMapping(nextCode));
    for (let i = 0; i < 3; i++) await service.app.inject({ method: 'GET', url: `/${mapping.code}` });
    await service.app.inject({ method: 'GET', url: '/nosuch77' });
    await service.app.inject({ method: 'GET', url: '/nosuch77' });
    const lookups = await samples(service, 'redirect_cache_lookups_total');
    // The first GET of each code misses; the later ones hit (the unknown code's negative entry too).
    expect(lookups).toContain('redirect_cache_lookups_total{result="miss"} 2');
    expect(lookups).toContain('redirect_cache_lookups_total{result="hit"} 3');
  });

  it('exposes process metrics and the rate-limit refusal counter', async () => {
    const service = await start({ RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_REDIRECTS_LIMIT: '1' });
    await service.app.inject({ method: 'GET', url: '/nosuch01' });
    expect((await service.app.inject({ method: 'GET', url: '/nosuch01' })).statusCode).toBe(429);
    expect(await samples(service, 'process_cpu_seconds_total')).toHaveLength(1);
    expect(await samples(service, 'rate_limit_refusals_total')).toContain(
      'rate_limit_refusals_total{policy="redirects"} 1',
    );
  });
});

describe('GET /health/ready', () => {
  it('answers 200 with each backend checked when all answer', async () => {
    const service = await start();
    const response = await service.app.inject({ method: 'GET', url: '/health/ready' });
    expect(response.statusCode).toBe(200);
    // The embedded log is the outbox: nothing ever waits beside it.
    expect(response.json()).toEqual({
      status: 'ok',
      checks: { database: 'ok', event_log: 'ok' },
      details: { event_log: { outbox_depth: 0, outbox_oldest_age_seconds: 0 } },
    });
  });

  it('answers 503 naming the backend that does not answer', async () => {
    const service = await start();
    await service.database.close(); // the database goes away under the running service
    const response = await service.app.inject({ method: 'GET', url: '/health/ready' });
    expect(response.statusCode).toBe(503);
    // The embedded event log lives in the same database, so it goes with it.
    expect(response.json()).toEqual({
      detail: 'database and event_log are not available',
      checks: { database: 'unavailable', event_log: 'unavailable' },
    });
  });

  it('answers 503 naming Redis when the Redis in use stops answering', async () => {
    if (!(await redisAvailable())) return;
    // The service reaches Redis through a proxy that the test can cut.
    const target = new URL(REDIS_URL);
    const sockets = new Set<net.Socket>();
    const proxy = net.createServer((client) => {
      const upstream = net.connect(Number(target.port || 6379), target.hostname);
      for (const socket of [client, upstream]) {
        sockets.add(socket);
        socket.on('error', () => undefined).on('close', () => sockets.delete(socket));
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const prefix = uniqueRedisPrefix('readiness');
    try {
      const service = await start({
        REDIS_URL: `redis://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`,
        REDIS_KEY_PREFIX: prefix,
      });
      const ready = await service.app.inject({ method: 'GET', url: '/health/ready' });
      expect(ready.json()).toEqual({
        status: 'ok',
        checks: { database: 'ok', event_log: 'ok', redis: 'ok' },
        details: { event_log: { outbox_depth: 0, outbox_oldest_age_seconds: 0 } },
      });

      const closed = new Promise((resolve) => proxy.close(resolve));
      for (const socket of sockets) socket.destroy();
      await closed;
      const down = await service.app.inject({ method: 'GET', url: '/health/ready' });
      expect(down.statusCode).toBe(503);
      expect(down.json()).toEqual({
        detail: 'redis is not available',
        checks: { database: 'ok', event_log: 'ok', redis: 'unavailable' },
        details: { event_log: { outbox_depth: 0, outbox_oldest_age_seconds: 0 } },
      });
    } finally {
      proxy.close();
      for (const socket of sockets) socket.destroy();
      await deleteRedisKeys(prefix);
    }
  });

  it('is in the OpenAPI document as readiness_check', async () => {
    const service = await start();
    const document = service.app.swagger() as {
      paths: Record<string, { get?: { operationId?: string; tags?: string[] } }>;
    };
    expect(document.paths['/health/ready']?.get).toMatchObject({
      operationId: 'readiness_check',
      tags: ['infrastructure'],
    });
  });
});
