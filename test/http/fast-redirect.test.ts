/**
 * `GET|HEAD /{code}` over real HTTP, answered by the fast path in front of Fastify
 * (`REDIRECT_FAST_PATH=true`, the default) and by the route (`false`): the same bytes, the same
 * rate-limit decisions, metrics and clicks. `app.inject()` never reaches the fast path, so every
 * request here goes through a socket.
 */
import net, { type AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FastRedirect } from '../../src/http/fast-redirect.js';
import { RateLimitHooks } from '../../src/http/plugins/rate-limit.js';
import { UrlMappingService } from '../../src/services/url-mapping-service.js';
import { type TestApp, useTestApps } from '../helpers/app.js';
import { metricValue } from '../helpers/auth.js';
import { BACKENDS, sqlite } from '../helpers/backends.js';
import { codeMaker, createMapping, findListed, newMapping } from '../helpers/http.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';
import { storedClicks } from '../helpers/stored-clicks.js';

const nextCode = codeMaker('fst');
const PATHS = [
  { path: 'fast path', fastPath: 'true' },
  { path: 'route', fastPath: 'false' },
] as const;

/** Sends `requests` (raw HTTP/1.1, keep-alive) on one connection; the raw answers, `Date` taken out. */
function exchange(port: number, requests: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let received = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('error', reject);
    socket.on('end', () => resolve(received.replace(/\r\nDate: [^\r]*/g, '')));
    const last = requests.length - 1;
    socket.write(
      requests
        .map((r, i) => `${r} HTTP/1.1\r\nHost: 127.0.0.1${i === last ? '\r\nConnection: close' : ''}\r\n\r\n`)
        .join(''),
    );
  });
}

/** One request on a connection of its own: status, headers (lower-case names) and body. */
async function request(port: number, line: string) {
  const raw = await exchange(port, [line]);
  const [head = '', body = ''] = raw.split('\r\n\r\n');
  const [status = '', ...fields] = head.split('\r\n');
  const headers = Object.fromEntries(
    fields.map((f) => [f.slice(0, f.indexOf(':')).toLowerCase(), f.slice(f.indexOf(':') + 1).trim()]),
  );
  return { status: Number(status.split(' ')[1]), headers, body };
}

async function listening(app: TestApp): Promise<number> {
  await app.app.listen({ host: '127.0.0.1', port: 0 });
  return (app.app.server.address() as AddressInfo).port;
}

describe.each(BACKENDS)('GET|HEAD /{code} over HTTP on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  const startApp = useTestApps('each');
  let early: ReturnType<typeof vi.spyOn>;
  beforeEach(() => {
    early = vi.spyOn(RateLimitHooks.prototype, 'consumeEarly');
  });
  afterEach(() => early.mockRestore());

  const start = async (fastPath: string, env: Record<string, string> = {}) => {
    const app = await startApp(backend, { RATE_LIMIT_ENABLED: 'true', REDIRECT_FAST_PATH: fastPath, ...env });
    return { app, port: await listening(app) };
  };

  test('the fast path answers with the bytes of the route, and the same metrics', async () => {
    const fast = await start('true');
    const route = await start('false');
    const code = nextCode();
    for (const { app } of [fast, route]) {
      await createMapping(
        app,
        newMapping(() => code, { url: 'https://example.com/a?b=c#d' }),
      );
      await createMapping(app, newMapping(nextCode, { code: 'MiXeD1', url: 'https://例え.jp/パ' }));
    }
    const requests = [
      `GET /${code}`, // a miss, loaded
      `GET /${code}`, // a hit
      `GET /${code}?utm_source=x`,
      `HEAD /${code}`,
      'GET /MiXeD1',
      'GET /mixed1',
      'GET /unknown01',
      'GET /unknown01',
      'HEAD /unknown01',
      'GET /abcd5',
      'HEAD /abc-12',
      'GET /%4DiXeD1',
      'GET /shorten',
      'POST /MiXeD1',
    ];
    // The bucket refills 50,000 tokens a second: the remaining count depends on the timing.
    const answers = (await Promise.all([fast, route].map(({ port }) => exchange(port, requests)))).map((raw) =>
      raw.replace(/(ratelimit: "redirects";)r=\d+;t=\d+/g, '$1r=N;t=T'),
    );
    expect(answers[0]).toBe(answers[1]);
    expect(answers[0]).toContain('location: https://example.com/a?b=c#d\r\n');
    expect(answers[0]).toContain('location: https://xn--r8jz45g.jp/%E3%83%91\r\n');
    // The fast path decided every plain code's request, unknown ones included (9); the route none.
    expect(early).toHaveBeenCalledTimes(9);

    const series = (text: string) => text.split('\n').filter((l) => /^http_requests_total\{.*route="\/:code"/.test(l));
    const metrics = await Promise.all(
      [fast, route].map(async ({ app }) => series((await app.inject({ method: 'GET', url: '/metrics' })).body)),
    );
    expect(metrics[0]).toEqual(metrics[1]);
    expect(metrics[0]).toContain('http_requests_total{method="GET",route="/:code",status_code="302"} 5');
    expect(metrics[0]).toContain('http_requests_total{method="HEAD",route="/:code",status_code="404"} 1');
  });

  test('a throw in the fast path (none is expected) leaves the request to the route', async () => {
    const { app, port } = await start('true');
    const created = await createMapping(app, newMapping(nextCode, { url: 'https://example.com/fallback' }));
    const broken = vi.spyOn(FastRedirect.prototype, 'redirect').mockImplementationOnce(() => {
      throw new Error('broken on purpose');
    });
    try {
      const answer = await request(port, `GET /${created.code}`);
      expect(answer.status).toBe(302);
      expect(answer.headers.location).toBe('https://example.com/fallback');
      expect(broken).toHaveBeenCalledTimes(1);
    } finally {
      broken.mockRestore();
    }
  });

  test('a redirect that waits for its lookup is under the connection timeout (CONNECTION_TIMEOUT_MS)', async () => {
    const { app, port } = await start('true', { CONNECTION_TIMEOUT_MS: '500' });
    const created = await createMapping(app, newMapping(nextCode));
    const socket = net.connect({ host: '127.0.0.1', port });
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
    socket.on('error', () => undefined);
    const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now())));
    const get = `GET /${created.code} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;
    // A redirect answered at once; then, on the same connection (idle between the two: node holds
    // it by its keep-alive timeout and clears that at the next request), a lookup that never ends.
    socket.write(get);
    await vi.waitFor(() => expect(received).toMatch(/^HTTP\/1\.1 302 Found\r\n[^]*\r\n\r\n$/));
    const stuck = vi.spyOn(UrlMappingService.prototype, 'resolve').mockImplementationOnce(() => new Promise(() => {}));
    try {
      const sent = Date.now();
      socket.write(get);
      const timedOut = new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error('the connection is still open after 5 s')), 5000).unref(),
      );
      const closedAfterMs = (await Promise.race([closed, timedOut])) - sent;
      expect(stuck).toHaveBeenCalledTimes(1);
      expect(closedAfterMs).toBeGreaterThanOrEqual(400);
      expect(received.match(/HTTP\/1\.1/g)).toHaveLength(1);
    } finally {
      stuck.mockRestore();
      socket.destroy();
    }
  });

  describe.each(PATHS)('through the $path', ({ fastPath }) => {
    test('429 once the redirects limit is spent: Retry-After, the draft headers, no click counted', async () => {
      const { app, port } = await start(fastPath, {
        RATE_LIMIT_REDIRECTS_LIMIT: '2',
        RATE_LIMIT_REDIRECTS_WINDOW_S: '60',
      });
      const created = await createMapping(app, newMapping(nextCode));
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push(await request(port, `GET /${created.code}`));
      expect(answers.map((a) => a.status)).toEqual([302, 302, 429]);
      const refused = answers[2]!;
      expect(refused.body).toBe('{"detail":"Rate limit exceeded"}');
      expect(refused.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(refused.headers['ratelimit-policy']).toBe('"redirects";q=2;w=60');
      expect(refused.headers.ratelimit).toMatch(/^"redirects";r=0;t=\d+$/);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(answers[1]!.headers.ratelimit).toMatch(/^"redirects";r=0;t=\d+$/);
      expect(answers[0]!.headers.ratelimit).toMatch(/^"redirects";r=1;t=\d+$/);
      expect(await metricValue(app.app, 'rate_limit_refusals_total', { policy: 'redirects' })).toBe(1);
      expect(
        await metricValue(app.app, 'http_requests_total', { method: 'GET', route: '/:code', status_code: '429' }),
      ).toBe(1);
      expect((await findListed(app, created.code))?.click_count).toBe(2);
      expect(early).toHaveBeenCalledTimes(fastPath === 'true' ? 3 : 0);
    });

    test('each GET counts exactly once, HEAD never, also for concurrent first lookups', async () => {
      const { app, port } = await start(fastPath);
      const created = await createMapping(app, newMapping(nextCode, { click_count: 3 }));
      const gets = await Promise.all(Array.from({ length: 20 }, () => request(port, `GET /${created.code}`)));
      expect(gets.every((a) => a.status === 302 && a.headers.location === created.url)).toBe(true);
      const heads = await Promise.all(Array.from({ length: 5 }, () => request(port, `HEAD /${created.code}`)));
      expect(heads.every((a) => a.status === 302 && a.body === '')).toBe(true);
      expect((await findListed(app, created.code))?.click_count).toBe(23);
      await app.service.clicks.flush();
      expect(await storedClicks(app.service.database.db, { code: created.code })).toBe(23);
      expect((await findListed(app, created.code))?.click_count).toBe(23);
    });

    test('a change or a delete is seen by the next redirect', async () => {
      const { app, port } = await start(fastPath);
      const created = await createMapping(app, newMapping(nextCode, { url: 'https://example.com/before' }));
      expect((await request(port, `GET /${created.code}`)).headers.location).toBe('https://example.com/before');
      const patched = await app.inject({
        method: 'PATCH',
        url: `/${created.code}`,
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ url: 'https://example.com/after' }),
      });
      expect(patched.statusCode, patched.body).toBe(200);
      expect((await request(port, `GET /${created.code}`)).headers.location).toBe('https://example.com/after');
      expect((await app.inject({ method: 'DELETE', url: `/${created.code}` })).statusCode).toBe(204);
      const gone = await request(port, `GET /${created.code}`);
      expect(gone.status).toBe(404);
      expect(gone.body).toBe('{"detail":"URL mapping not found"}');
    });
  });
});

describe('GET /{code} over HTTP with the Redis rate limiter (decisions come later)', async () => {
  const available = await redisAvailable();
  const prefix = uniqueRedisPrefix('fast-redirect');
  const startApp = useTestApps('each');
  afterAll(async () => {
    if (available) await deleteRedisKeys(prefix);
  });

  describe.each(PATHS)('through the $path', ({ fastPath }) => {
    it.skipIf(!available)(
      'admits exactly the limit under 30 concurrent requests, counting a click per admitted GET',
      async () => {
        const app = await startApp(sqlite, {
          RATE_LIMIT_ENABLED: 'true',
          REDIRECT_FAST_PATH: fastPath,
          REDIS_URL,
          REDIS_KEY_PREFIX: `${prefix}${fastPath}:`,
          RATE_LIMIT_REDIRECTS_LIMIT: '12',
          RATE_LIMIT_REDIRECTS_WINDOW_S: '60',
        });
        const port = await listening(app);
        const created = await createMapping(app, newMapping(nextCode));
        const answers = await Promise.all(Array.from({ length: 30 }, () => request(port, `GET /${created.code}`)));
        const statuses = answers.map((a) => a.status);
        expect(statuses.filter((s) => s === 302)).toHaveLength(12);
        expect(statuses.filter((s) => s === 429)).toHaveLength(18);
        for (const answer of answers) expect(answer.headers['ratelimit-policy']).toBe('"redirects";q=12;w=60');
        expect(await metricValue(app.app, 'rate_limit_refusals_total', { policy: 'redirects' })).toBe(18);
        expect((await findListed(app, created.code))?.click_count).toBe(12);
      },
    );
  });
});
