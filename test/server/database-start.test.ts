/**
 * The start while PostgreSQL does not answer yet (DB_START_TIMEOUT_MS): `serve` and `migrate` say
 * once that they wait, try again every second, and go on as soon as it answers; past the deadline
 * they end with the one line naming DATABASE_URL and exit 1; a refusal that waiting cannot change
 * (an unknown database) ends the start at once. The database "starting" is a proxy in front of the
 * test server that resets every connection until it has reset two of the start's tries. The built
 * service (`npm run build`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgres, type TestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { send } from '../helpers/http-client.js';
import { freePort } from '../helpers/own-server.js';
import { runCli, type ServerProcess, startServer } from '../helpers/server-process.js';
import { postgresBehindProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * Connections the proxy refuses before it lets the start through: two of its tries, a second
 * apart (counted, not timed: on a loaded machine a process may take seconds to reach its first).
 */
const REFUSED_TRIES = 2;
const lines = (output: string, pattern: RegExp) => output.split('\n').filter((line) => pattern.test(line));
const WAITING =
  /waiting for PostgreSQL at postgres:\/\/postgres@127\.0\.0\.1:\d+\/test.*; trying again every second for up to 30 s \(DB_START_TIMEOUT_MS\)/;

describe.skipIf(!postgres.available)('the start while PostgreSQL does not answer yet', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let url: string;
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    database = await postgres.create();
    ({ proxy, url } = await postgresBehindProxy(database.databaseUrl));
  });
  afterAll(async () => {
    for (const server of servers) await server.stop('SIGKILL');
    await proxy?.close();
    await database?.drop();
  });

  /** Runs `start` with the proxy refusing, and lets it through once it has been refused REFUSED_TRIES times. */
  async function throughRefusals<T>(start: () => Promise<T>): Promise<T> {
    await proxy.refuse();
    const before = proxy.refused;
    const started = start();
    started.catch(() => undefined); // awaited below; a failed start is the test's failure there
    await eventually(() => expect(proxy.refused - before).toBeGreaterThanOrEqual(REFUSED_TRIES), {
      timeoutMs: 60_000,
      intervalMs: 50,
    });
    await proxy.pass();
    return started;
  }

  it('migrate waits, says so once, and applies the schema once the server answers', async () => {
    const { code, output } = await throughRefusals(() => runCli(['migrate'], { DATABASE_URL: url }));
    expect(code, output).toBe(0);
    expect(lines(output, WAITING), output).toHaveLength(1);
    expect(output).toMatch(/^applied: /m);
  }, 60_000);

  it('serve waits, says so once, and serves once the server answers', async () => {
    const server = await throughRefusals(() => startServer({ DATABASE_URL: url, RATE_LIMIT_ENABLED: 'false' }));
    servers.push(server);
    const output = server.output();
    const waiting = lines(output, WAITING);
    expect(waiting, output).toHaveLength(1);
    expect(JSON.parse(waiting[0]!)).toMatchObject({ level: 40 });
    expect(output.indexOf(waiting[0]!)).toBeLessThan(output.indexOf('Server listening'));
    expect((await send(server.url, 'GET', '/health/ready')).status).toBe(200);
    const created = await send(server.url, 'POST', '/shorten', {
      body: {
        code: 'dbstart01',
        url: 'https://example.com/db-start',
        created_at: '2024-01-01T00:00:00Z',
        click_count: 0,
      },
    });
    expect(created.status, created.text).toBe(201);
  }, 60_000);

  it.each([['serve'], ['migrate']])(
    '%s past DB_START_TIMEOUT_MS: the waiting line, then the one line naming DATABASE_URL, exit 1',
    async (command) => {
      const port = await freePort();
      const closed = `postgres://postgres:hunter2@127.0.0.1:${port}/test`;
      const started = Date.now();
      const { code, output } = await runCli([command], { DATABASE_URL: closed, DB_START_TIMEOUT_MS: '1500' });
      expect(code, output).toBe(1);
      expect(Date.now() - started).toBeGreaterThanOrEqual(1500);
      const said = output.trim().split('\n');
      expect(said, output).toHaveLength(2);
      expect(said[0]).toContain(
        `waiting for PostgreSQL at postgres://postgres:***@127.0.0.1:${port}/test (connect ECONNREFUSED 127.0.0.1:${port}); trying again every second for up to 1.5 s (DB_START_TIMEOUT_MS)`,
      );
      expect(said[1]).toBe(
        `cannot use PostgreSQL at postgres://postgres:***@127.0.0.1:${port}/test (connect ECONNREFUSED 127.0.0.1:${port}); check DATABASE_URL and that the server runs`,
      );
    },
  );

  it('an unknown database ends the start at once: no waiting, one line, exit 1', async () => {
    const unknown = new URL(url);
    unknown.pathname = '/no_such_database_here';
    const { code, output } = await runCli(['migrate'], { DATABASE_URL: unknown.toString() });
    expect(code, output).toBe(1);
    expect(output.trim().split('\n')).toEqual([
      expect.stringMatching(/^cannot use PostgreSQL at .*\/no_such_database_here.*does not exist/),
    ]);
  });
});
