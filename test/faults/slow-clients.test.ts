/**
 * Slow clients cannot hold connections (issue #11, item 7): a request whose body (or headers)
 * trickles in is answered 408 `{detail}` and its connection closed once `REQUEST_TIMEOUT_MS`
 * (`HEADERS_TIMEOUT_MS`) has passed, while ordinary requests keep being served; and the limits
 * are on by default.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { compose } from '../../src/composition/compose.js';
import { sqlite, testConfig, type TestDatabase } from '../helpers/backends.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { fetchShorten } from '../helpers/http.js';

const REQUEST_TIMEOUT_MS = 2000;
const HEADERS_TIMEOUT_MS = 1000;
/** The limit, plus Node's check interval (a quarter of the shortest limit), plus slack for a busy machine. */
const CLOSED_WITHIN_MS = REQUEST_TIMEOUT_MS + 2500;

interface SlowClient {
  readonly kind: string;
  /** When the server closed the connection, relative to the client's start; undefined while open. */
  closedAfterMs: number | undefined;
  received: string;
  /** Writes more at once. */
  send(text: string): void;
  stop(): void;
}

/** Opens a connection that sends `head` at once, then `trickle` one byte every `everyMs`. */
function slowClient(port: number, kind: string, head: string, trickle: string, everyMs: number): SlowClient {
  const started = Date.now();
  const socket = net.connect({ host: '127.0.0.1', port });
  let sent = 0;
  const timer = setInterval(() => {
    if (sent < trickle.length && !socket.destroyed) socket.write(trickle[sent++]!);
  }, everyMs);
  const client: SlowClient = {
    kind,
    closedAfterMs: undefined,
    received: '',
    send: (text) => socket.write(text),
    stop: () => {
      clearInterval(timer);
      socket.destroy();
    },
  };
  socket.on('connect', () => head && socket.write(head));
  socket.on('data', (chunk: Buffer) => (client.received += chunk.toString()));
  socket.on('error', () => undefined);
  socket.on('close', () => {
    clearInterval(timer);
    client.closedAfterMs ??= Date.now() - started;
  });
  return client;
}

describe('HTTP timeouts', () => {
  it('are on by default', async () => {
    expect(loadConfig({}).http).toEqual({
      requestTimeoutMs: 30_000,
      headersTimeoutMs: 10_000,
      keepAliveTimeoutMs: 5000,
      connectionTimeoutMs: 60_000,
    });
    expect(() => loadConfig({ REQUEST_TIMEOUT_MS: '1000', HEADERS_TIMEOUT_MS: '2000' })).toThrow(/HEADERS_TIMEOUT_MS/);
    const database = await sqlite.create();
    const service = await compose(testConfig(database.databaseUrl), { logger: false });
    try {
      const server = service.app.server;
      expect(server.requestTimeout).toBe(30_000);
      expect(server.headersTimeout).toBe(10_000);
      expect(server.keepAliveTimeout).toBe(5000);
      // The connection timeout is armed per connection and per request by the redirect fast path
      // (src/http/fast-redirect.ts), not by node on every socket: 'the connection timeout' below.
      expect(server.timeout).toBe(0);
    } finally {
      await service.close();
      await database.drop();
    }
  });

  describe('against slow clients', () => {
    let database: TestDatabase;
    let server: ServerProcess;
    let port: number;
    const clients: SlowClient[] = [];

    beforeAll(async () => {
      database = await sqlite.create();
      server = await startServer({
        DATABASE_URL: database.databaseUrl,
        RATE_LIMIT_ENABLED: 'false',
        REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
        HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      });
      port = Number(new URL(server.url).port);
    });
    afterAll(async () => {
      for (const c of clients) c.stop();
      await server?.stop();
      await database?.drop();
    });

    it('closes trickling connections within the limit and keeps serving ordinary requests', async () => {
      const body = JSON.stringify({
        code: 'slowbody1',
        url: 'https://example.com/',
        created_at: '2024-01-01T00:00:00Z',
        click_count: 0,
      });
      const head =
        `POST /shorten HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\n\r\n`;
      // Ten bodies and five header sections trickling in a byte every 200 ms, and three silent connections.
      for (let i = 0; i < 10; i++) clients.push(slowClient(port, 'body', head, body, 200));
      for (let i = 0; i < 5; i++) clients.push(slowClient(port, 'headers', '', head, 200));
      for (let i = 0; i < 3; i++) clients.push(slowClient(port, 'silent', '', '', 200));

      // Meanwhile ordinary requests are answered, one after another, until every slow client is gone.
      const started = Date.now();
      let served = 0;
      let n = 0;
      while (clients.some((c) => c.closedAfterMs === undefined) && Date.now() - started < CLOSED_WITHIN_MS + 2000) {
        const code = `fast${String(++n).padStart(5, '0')}`;
        const created = await fetchShorten(server.url, { code, url: 'https://example.com/' });
        expect(created.status, await created.text()).toBe(201);
        const resolved = await fetch(`${server.url}/${code}`, { redirect: 'manual' });
        expect(resolved.status).toBe(302);
        served += 2;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(served).toBeGreaterThan(10);
      for (const client of clients) {
        expect(client.closedAfterMs, `${client.kind} connection still open`).toBeDefined();
        expect(client.closedAfterMs!, client.kind).toBeLessThanOrEqual(CLOSED_WITHIN_MS);
        // The body clients outlived the headers limit (their headers were complete): the request limit cut them.
        if (client.kind === 'body') expect(client.closedAfterMs!).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 100);
        expect(client.received, client.kind).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
        expect(JSON.parse(client.received.slice(client.received.indexOf('\r\n\r\n') + 4))).toEqual({
          detail: 'Request not received in time',
        });
      }
      // The trickled body never became a mapping.
      expect((await fetch(`${server.url}/slowbody1`, { redirect: 'manual' })).status).toBe(404);
      expect(server.child.exitCode).toBeNull();
    });
  });

  /**
   * CONNECTION_TIMEOUT_MS alone (the request and headers limits off): a connection on which
   * nothing arrives for that long, before its first request or during a request that is still
   * being read or answered, is closed; one on which bytes keep arriving is not. Node would arm it
   * on every socket; the fast path arms it on a new connection, on every request it hands to
   * Fastify and before it waits, and leaves it off the redirects it answers at once.
   */
  describe('the connection timeout', () => {
    const IDLE_MS = 1000;
    /** The limit, plus node's timer granularity and a busy machine's slack. */
    const CLOSED_BY_MS = IDLE_MS + 1500;
    let database: TestDatabase;
    let server: ServerProcess;
    let port: number;
    const clients: SlowClient[] = [];
    const stalledPost = `POST /shorten HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"co`;
    const closed = async (client: SlowClient, withinMs: number) => {
      const started = Date.now();
      while (client.closedAfterMs === undefined && Date.now() - started < withinMs)
        await new Promise((resolve) => setTimeout(resolve, 25));
      return client.closedAfterMs;
    };

    beforeAll(async () => {
      database = await sqlite.create();
      server = await startServer({
        DATABASE_URL: database.databaseUrl,
        RATE_LIMIT_ENABLED: 'false',
        REQUEST_TIMEOUT_MS: '0',
        HEADERS_TIMEOUT_MS: '0',
        CONNECTION_TIMEOUT_MS: String(IDLE_MS),
      });
      port = Number(new URL(server.url).port);
      const created = await fetchShorten(server.url, { code: 'idle0001', url: 'https://example.com/' });
      expect(created.status).toBe(201);
    });
    afterAll(async () => {
      for (const c of clients) c.stop();
      await server?.stop();
      await database?.drop();
    });

    it('closes a connection that sends nothing', async () => {
      const silent = slowClient(port, 'silent', '', '', 1000);
      clients.push(silent);
      expect(await closed(silent, CLOSED_BY_MS + 1000)).toBeGreaterThanOrEqual(IDLE_MS - 100);
      expect(silent.closedAfterMs!).toBeLessThanOrEqual(CLOSED_BY_MS);
    });

    it('closes a connection whose request stops arriving, its first or one after a redirect on it', async () => {
      const first = slowClient(port, 'first', stalledPost, '', 1000);
      // A redirect answered by the fast path; once it is answered (node then holds the idle
      // connection by its keep-alive timeout) a request on the same connection that stalls.
      const later = slowClient(port, 'later', 'GET /idle0001 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', '', 1000);
      clients.push(first, later);
      const redirected = Date.now();
      while (!later.received.includes('\r\n\r\n') && Date.now() - redirected < 5000)
        await new Promise((resolve) => setTimeout(resolve, 10));
      expect(later.received).toMatch(/^HTTP\/1\.1 302 Found\r\n/);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const sentAt = Date.now();
      later.send(stalledPost);
      expect(await closed(first, CLOSED_BY_MS + 1000), 'first').toBeGreaterThanOrEqual(IDLE_MS - 100);
      expect(first.closedAfterMs!, 'first').toBeLessThanOrEqual(CLOSED_BY_MS);
      expect(first.received).toBe('');
      expect(await closed(later, CLOSED_BY_MS + 1000), 'later').toBeDefined();
      const laterClosedMs = Date.now() - sentAt;
      expect(laterClosedMs, 'later').toBeGreaterThanOrEqual(IDLE_MS - 100);
      expect(laterClosedMs, 'later').toBeLessThanOrEqual(CLOSED_BY_MS + 200);
    });

    it('closes a connection that pipelines redirects and stops reading their answers', async () => {
      // 100,000 redirects asked at once (about 19 MB of answers, more than the kernel's buffers on
      // both sides hold), none of the answers read: node stops reading the connection once they
      // back up, and the connection timeout closes it. A client that does not read sees the close
      // only if a write of its own fails; else it starts reading after a while: the answers the
      // server wrote before it closed arrive, then the end. A server that had kept the connection
      // would answer all 100,000.
      const REQUESTS = 100_000;
      const socket = net.connect({ host: '127.0.0.1', port });
      socket.pause();
      socket.on('error', () => undefined);
      let closed = false;
      const closedAt = new Promise<void>((resolve) =>
        socket.on('close', () => {
          closed = true;
          resolve();
        }),
      );
      socket.write('GET /idle0001 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'.repeat(REQUESTS));
      await new Promise((resolve) => setTimeout(resolve, CLOSED_BY_MS + 2000));
      if (!closed) {
        let answers = 0;
        let carry = '';
        socket.on('data', (chunk: Buffer) => {
          const text = carry + chunk.toString('latin1');
          answers += text.split('HTTP/1.1 302 ').length - 1;
          carry = text.slice(-12);
        });
        socket.resume();
        const timedOut = new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error(`still open after 20 s, ${answers} answers read`)), 20_000).unref(),
        );
        await Promise.race([closedAt, timedOut]);
        expect(answers).toBeGreaterThan(0);
        expect(answers).toBeLessThan(REQUESTS);
      }
      // Meanwhile and after, ordinary requests are answered.
      expect((await fetch(`${server.url}/idle0001`, { redirect: 'manual' })).status).toBe(302);
      expect(server.child.exitCode).toBeNull();
    }, 40_000);

    it('keeps a connection open while its request keeps arriving, and closes it once it stops', async () => {
      const trickle = '{"code":"idle0002"';
      const client = slowClient(port, 'trickle', stalledPost.slice(0, -4), trickle, IDLE_MS / 4);
      clients.push(client);
      // Bytes every quarter of the limit, for more than twice the limit.
      await new Promise((resolve) => setTimeout(resolve, (trickle.length * IDLE_MS) / 4 - 200));
      expect(client.closedAfterMs).toBeUndefined();
      const stoppedAt = Date.now();
      const closedAfterMs = await closed(client, CLOSED_BY_MS + 1000);
      expect(closedAfterMs).toBeDefined();
      expect(Date.now() - stoppedAt).toBeLessThanOrEqual(CLOSED_BY_MS + 200);
      expect(server.child.exitCode).toBeNull();
    });
  });
});
