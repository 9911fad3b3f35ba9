/**
 * The distributed deployment for real: two API processes and one worker process of the built
 * service (`serve --role api|worker`, started as `npm start` starts it), sharing PostgreSQL,
 * Redis and NATS JetStream. Links and sessions made through one API instance hold on the other;
 * a deletion reaches the other's redirect cache through the bus (the cache TTL is a minute here,
 * so expiry cannot be what makes it stop); an execution submitted through one API completes on
 * the worker and notifies a receiver; one trace spans the request, the worker and the notification.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgres, type TestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, newMapping } from '../helpers/http.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { inCi, NATS_URL, natsAvailable, REDIS_URL, redisAvailable } from '../helpers/services.js';
import { Receiver, verifyStandardWebhook } from '../notifications/receiver.js';
import { OtlpReceiver, type OtlpSpan, SPAN_KIND, spanAttribute } from '../helpers/otlp-receiver.js';
import { type BrowserSession, newAccount, send as request, sessionOf } from '../helpers/http-client.js';
import { deleteNatsStreams } from '../helpers/nats.js';

const ROOT = join(import.meta.dirname, '..', '..');
const LOCKED = 'Account locked due to too many failed attempts';
const nextCode = codeMaker('dist');

async function loginAt(base: string, username: string, password: string): Promise<BrowserSession> {
  const response = await request(base, 'POST', '/api/v1/auth/login', { body: { username, password } });
  expect(response.status, response.text).toBe(200);
  const session = sessionOf(response);
  expect(session, response.text).toBeTruthy();
  return session!;
}

async function registerAt(base: string, prefix: string) {
  const user = newAccount(prefix);
  const response = await request(base, 'POST', '/api/v1/auth/register', { body: user });
  expect(response.status, response.text).toBe(201);
  return user;
}

describe('two API instances and one worker on PostgreSQL, Redis and NATS', async () => {
  const available = postgres.available && (await redisAvailable()) && (await natsAvailable());
  const built = existsSync(join(ROOT, 'dist', 'cli.js'));
  if (available && !built) {
    const message = 'dist/cli.js is missing: run `npm run build` first (npm test does)';
    if (inCi) throw new Error(message);
    console.warn(`skipping the distributed tests: ${message}`);
  }
  const ready = available && built;

  const otlp = new OtlpReceiver();
  const hooks = new Receiver();
  const redisPrefix = uniqueRedisPrefix('cluster');
  const natsPrefix = `tcl${Date.now().toString(36)}${process.pid}_`;
  let database: TestDatabase | undefined;
  const processes: ServerProcess[] = [];
  let apiA: string;
  let apiB: string;

  beforeAll(async () => {
    if (!ready) return;
    await otlp.listen();
    await hooks.listen();
    database = await postgres.create();
    const env = (service: string) => ({
      DATABASE_URL: database!.databaseUrl,
      REDIS_URL,
      REDIS_KEY_PREFIX: redisPrefix,
      NATS_URL,
      NATS_PREFIX: natsPrefix,
      SECRET_KEY: 'distributed-cluster-secret-key-0123456789abcdef',
      NODE_ENV: 'test',
      BCRYPT_ROUNDS: '4',
      RATE_LIMIT_ENABLED: 'false',
      NOTIFICATIONS_ALLOW_PRIVATE: 'true',
      CACHE_TTL_MS: '60000',
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_SERVICE_NAME: service,
      OTEL_BSP_SCHEDULE_DELAY: '500',
      TRACING_SAMPLING_RATE: '1',
      SHUTDOWN_TIMEOUT_MS: '5000',
    });
    // One after the other: the first runs the migrations, the others find them done.
    const a = await startServer(env('urlshortener-api-a'), ['serve', '--role', 'api']);
    processes.push(a);
    const [b, worker] = await Promise.all([
      startServer(env('urlshortener-api-b'), ['serve', '--role', 'api']),
      startServer(env('urlshortener-worker'), ['serve', '--role', 'worker']),
    ]);
    processes.push(b, worker);
    apiA = a.url;
    apiB = b.url;
  }, 60_000);

  afterAll(async () => {
    await Promise.all(processes.map((p) => p.stop('SIGTERM')));
    if (!ready) return;
    await otlp.close();
    await hooks.close();
    await database?.drop();
    await deleteRedisKeys(redisPrefix);
    await deleteNatsStreams(natsPrefix);
  }, 30_000);

  it.skipIf(!ready)('each process runs its role: the worker serves /health but not the API', async () => {
    for (const url of [apiA, apiB, processes[2]!.url]) expect((await request(url, 'GET', '/health')).status).toBe(200);
    expect((await request(processes[2]!.url, 'POST', '/shorten', { body: newMapping(nextCode) })).status).toBe(404);
  });

  it.skipIf(!ready)('links created through one API instance are resolved through the other', async () => {
    const mapping = newMapping(nextCode, { url: 'https://example.com/created-on-a' });
    const created = await request(apiA, 'POST', '/shorten', { body: mapping });
    expect(created.status, created.text).toBe(201);
    const resolved = await request(apiB, 'GET', `/${mapping.code}`);
    expect(resolved.status).toBe(302);
    expect(resolved.headers.get('location')).toBe('https://example.com/created-on-a');
    // And the other way round.
    const other = newMapping(nextCode, { url: 'https://example.com/created-on-b' });
    expect((await request(apiB, 'POST', '/shorten', { body: other })).status).toBe(201);
    expect((await request(apiA, 'GET', `/${other.code}`)).headers.get('location')).toBe(
      'https://example.com/created-on-b',
    );
  });

  it.skipIf(!ready)('a link deleted through one instance stops resolving on the other within one second', async () => {
    const mapping = newMapping(nextCode);
    expect((await request(apiA, 'POST', '/shorten', { body: mapping })).status).toBe(201);
    // B caches it (for a minute, were it not told).
    for (let i = 0; i < 2; i++) expect((await request(apiB, 'GET', `/${mapping.code}`)).status).toBe(302);
    const deleted = await request(apiA, 'DELETE', `/${mapping.code}`);
    expect(deleted.status, deleted.text).toBe(204);
    await eventually(async () => expect((await request(apiB, 'GET', `/${mapping.code}`)).status).toBe(404), {
      timeoutMs: 1000,
      intervalMs: 20,
    });
  });

  it.skipIf(!ready)('control: without an event, the other instance keeps serving its cached redirect', async () => {
    // What makes the test above meaningful: with CACHE_TTL_MS=60000, only the event can stop B.
    const mapping = newMapping(nextCode);
    expect((await request(apiA, 'POST', '/shorten', { body: mapping })).status).toBe(201);
    // Let B take in the url.created event (which drops whatever B cached for the code) first.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    expect((await request(apiB, 'GET', `/${mapping.code}`)).status).toBe(302);
    const client = new pg.Client({ connectionString: database!.databaseUrl });
    await client.connect();
    try {
      const removed = await client.query('DELETE FROM url_mappings WHERE code = $1', [mapping.code]);
      expect(removed.rowCount).toBe(1);
    } finally {
      await client.end();
    }
    await new Promise((resolve) => setTimeout(resolve, 1200));
    expect((await request(apiB, 'GET', `/${mapping.code}`)).status).toBe(302);
    // An instance that never cached it asks the database.
    expect((await request(apiA, 'GET', `/${mapping.code}`)).status).toBe(404);
  });

  it.skipIf(!ready)(
    'a link changed through one instance is served changed by the other within one second',
    async () => {
      const mapping = newMapping(nextCode, { url: 'https://example.com/before' });
      expect((await request(apiB, 'POST', '/shorten', { body: mapping })).status).toBe(201);
      expect((await request(apiA, 'GET', `/${mapping.code}`)).headers.get('location')).toBe(
        'https://example.com/before',
      );
      const patched = await request(apiB, 'PATCH', `/${mapping.code}`, { body: { url: 'https://example.com/after' } });
      expect(patched.status, patched.text).toBe(200);
      await eventually(
        async () =>
          expect((await request(apiA, 'GET', `/${mapping.code}`)).headers.get('location')).toBe(
            'https://example.com/after',
          ),
        { timeoutMs: 1000, intervalMs: 20 },
      );
    },
  );

  it.skipIf(!ready)('a lockout made through one instance holds on the other', async () => {
    const user = await registerAt(apiA, 'dlk');
    for (let i = 0; i < 5; i++) {
      expect(
        (
          await request(apiA, 'POST', '/api/v1/auth/login', {
            body: { username: user.username, password: 'wrong password!' },
          })
        ).status,
      ).toBe(401);
    }
    const locked = await request(apiB, 'POST', '/api/v1/auth/login', {
      body: { username: user.username, password: user.password },
    });
    expect(locked.status, locked.text).toBe(423);
    expect(locked.json<{ detail: string }>().detail).toBe(LOCKED);
  });

  it.skipIf(!ready)('a logout made through one instance holds on the other', async () => {
    const user = await registerAt(apiB, 'dlo');
    const session = await loginAt(apiA, user.username, user.password);
    const other = await loginAt(apiB, user.username, user.password);
    expect((await request(apiB, 'GET', '/api/v1/auth/me', { session })).status).toBe(200);
    expect((await request(apiA, 'POST', '/api/v1/auth/logout', { session, csrf: true })).status).toBe(200);
    expect((await request(apiB, 'GET', '/api/v1/auth/me', { session })).status).toBe(401);
    expect((await request(apiA, 'GET', '/api/v1/auth/me', { session })).status).toBe(401);
    expect((await request(apiA, 'GET', '/api/v1/auth/me', { session: other })).status).toBe(200);
  });

  it.skipIf(!ready)(
    'an execution submitted through one instance completes via the worker and notifies a receiver; one trace spans request, worker and notification',
    async () => {
      const user = await registerAt(apiA, 'dex');
      const onB = await loginAt(apiB, user.username, user.password);
      const channel = await request(apiB, 'POST', '/api/v1/notifications/channels', {
        session: onB,
        csrf: true,
        body: { type: 'webhook', name: 'cluster hook', url: `${hooks.url}/cluster` },
      });
      expect(channel.status, channel.text).toBe(201);
      const { secret } = channel.json<{ secret: string }>();

      const onA = await loginAt(apiA, user.username, user.password);
      const submitted = await request(apiA, 'POST', '/execute', {
        session: onA,
        body: { language: 'javascript', script: 'console.log("from the worker"); 6 * 7' },
      });
      expect(submitted.status, submitted.text).toBe(202);
      const { execution_id: executionId } = submitted.json<{ execution_id: string }>();

      // Completed by the worker, read through the other API instance.
      const execution = await eventually(
        async () => {
          const read = await request(apiB, 'GET', `/api/v1/executions/${executionId}`, { session: onB });
          expect(read.status, read.text).toBe(200);
          const body = read.json<{ status: string; output: string; result: unknown }>();
          if (body.status !== 'completed') throw new Error(`still ${body.status}`);
          return body;
        },
        { timeoutMs: 20_000, intervalMs: 100 },
      );
      expect(execution).toMatchObject({ status: 'completed', output: 'from the worker\n', result: 42 });

      const [hook] = await eventually(() => {
        const got = hooks.to('/cluster');
        if (got.length === 0) throw new Error('no webhook yet');
        return got;
      });
      expect(verifyStandardWebhook(secret, hook!.headers, hook!.body)).toBe(true);
      expect(JSON.parse(hook!.body)).toMatchObject({
        type: 'execution.completed',
        data: { execution_id: executionId, status: 'completed', result: 42 },
      });
      const notificationId = hook!.headers['webhook-id'];

      // One trace: API A's server span, the worker's executor span, the worker's sender span.
      const trace = await eventually(
        () => {
          const requestSpan = otlp.spans.find(
            (s) => s.service === 'urlshortener-api-a' && s.kind === SPAN_KIND.server && s.name === 'POST /execute',
          );
          if (!requestSpan) throw new Error(`no POST /execute span yet: ${otlp.spans.length} spans`);
          const inTrace = otlp.spans.filter((s) => s.traceId === requestSpan.traceId);
          const executor = inTrace.find(
            (s) =>
              s.service === 'urlshortener-worker' &&
              s.kind === SPAN_KIND.consumer &&
              spanAttribute(s, 'messaging.consumer.group.name') === 'executor' &&
              spanAttribute(s, 'execution.id') === executionId,
          );
          const sender = inTrace.find(
            (s) =>
              s.service === 'urlshortener-worker' &&
              spanAttribute(s, 'messaging.consumer.group.name') === 'notification-sender' &&
              spanAttribute(s, 'notification.id') === notificationId,
          );
          if (!executor || !sender) {
            throw new Error(`trace incomplete: ${inTrace.map((s) => `${s.service}:${s.name}`).join(', ')}`);
          }
          return { requestSpan, executor, sender, inTrace };
        },
        { timeoutMs: 15_000, intervalMs: 100 },
      );
      expect(spanAttribute(trace.requestSpan, 'execution.language')).toBe('javascript');
      expect(trace.requestSpan.parentSpanId ? trace.requestSpan.parentSpanId : '').toBe('');
      expect(spanAttribute(trace.sender, 'notification.channel')).toBe('webhook');
      expect(spanAttribute(trace.sender, 'execution.id')).toBe(executionId);
      // The executor's span descends from the request's span (through the publish).
      const byId = new Map(trace.inTrace.map((s) => [s.spanId, s]));
      const ancestors = (span: OtlpSpan) => {
        const seen: string[] = [];
        for (let p = span.parentSpanId; p && byId.has(p); p = byId.get(p)!.parentSpanId) seen.push(p);
        return seen;
      };
      expect(ancestors(trace.executor)).toContain(trace.requestSpan.spanId);
      expect(ancestors(trace.sender)).toContain(trace.executor.spanId);
    },
    60_000,
  );
});
