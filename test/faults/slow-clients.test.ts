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

const REQUEST_TIMEOUT_MS = 2000;
const HEADERS_TIMEOUT_MS = 1000;
/** The limit, plus Node's check interval (a quarter of the shortest limit), plus slack for a busy machine. */
const CLOSED_WITHIN_MS = REQUEST_TIMEOUT_MS + 2500;

interface SlowClient {
  readonly kind: string;
  /** When the server closed the connection, relative to the client's start; undefined while open. */
  closedAfterMs: number | undefined;
  received: string;
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
      expect(server.timeout).toBe(60_000);
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
        const created = await fetch(`${server.url}/shorten`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            code,
            url: 'https://example.com/',
            created_at: '2024-01-01T00:00:00Z',
            click_count: 0,
          }),
        });
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
});
