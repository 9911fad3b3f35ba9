/**
 * The command line as a new user meets it (issue 16): every command and subcommand answers
 * `--help` without doing anything else, and a service that cannot start (PostgreSQL away, the port
 * taken) says so in one line naming the setting to check and exits non-zero, without a stack;
 * NATS or Redis away is said at once too, in one line and without a stack (the service runs on: it
 * is built to ride them out).
 * Real processes of the built CLI (`npm run build`).
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import nodeModule from 'node:module';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { fetchShorten } from '../helpers/http.js';
import { freePort } from '../helpers/own-server.js';
import { runCli, startServer } from '../helpers/server-process.js';

const dir = mkdtempSync(join(tmpdir(), 'urlshortener-cli-'));
const sqliteUrl = (name: string) => `sqlite:${join(dir, name)}`;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** No line of a Node stack trace. */
const NO_STACK = /^\s+at /m;

/**
 * A service that runs on without a backing service: one line names the setting to check, and no
 * stack is printed, neither as lines nor inside a JSON log line (`"err":{"stack":…}`).
 */
function expectOneClearLine(output: string, setting: string): void {
  expect(
    output.split('\n').filter((line) => line.includes(setting)),
    output,
  ).toHaveLength(1);
  expect(output).not.toMatch(NO_STACK);
  expect(output).not.toMatch(/"stack"\s*:/);
}

const shorten = (url: string, code: string) => fetchShorten(url, { code, url: 'https://example.com/' });

describe('--help', () => {
  it.each([
    [['serve', '--help'], 'serve [--role all|api|worker] [--workers N|auto]', /--workers/],
    [['serve', '-h'], 'serve [--role all|api|worker] [--workers N|auto]', /SIGTERM/],
    [['migrate', '--help'], 'migrate', /schema/],
    [['openapi', '--help'], 'openapi', /OpenAPI document/],
    [['create-admin', '--help'], 'create-admin --username NAME --email ADDRESS', /ADMIN_PASSWORD/],
    [['config', '--help'], 'config --markdown', /--markdown/],
    [['config'], 'config --markdown', /--markdown/],
    [['help', 'migrate'], 'migrate', /schema/],
  ])('%j prints the usage of %s and exits 0, doing nothing else', async (args, usage, more) => {
    const database = `help-${args.join('-')}.db`;
    const { code, output } = await runCli(args, { DATABASE_URL: sqliteUrl(database), ADMIN_PASSWORD: 'not used 12' });
    expect(code, output).toBe(0);
    expect(output.startsWith(`usage: urlshortener ${usage}\n`), output).toBe(true);
    expect(output).toMatch(more);
    expect(output).not.toMatch(NO_STACK);
    expect(existsSync(join(dir, database)), 'no database was opened').toBe(false);
  });

  it.each([[['--help']], [['-h']], [['help']]])('%j lists every command', async (args) => {
    const { code, output } = await runCli(args, {});
    expect(code).toBe(0);
    for (const command of ['serve', 'migrate', 'openapi', 'create-admin', 'export', 'import', 'config']) {
      expect(output).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
    }
  });

  it.each([
    [['serve', '--bogus'], /^serve: Unknown option '--bogus'/],
    [['migrate', '--now'], /^migrate: Unknown option '--now'/],
    [['create-admin', '--user', 'x'], /^create-admin: Unknown option '--user'/],
    [['nope'], /^unknown command: nope/],
  ])('%j: one line saying what is wrong, then the usage; exit 64, no stack', async (args, message) => {
    const { code, output } = await runCli(args, { DATABASE_URL: sqliteUrl('bad-args.db') });
    expect(code, output).toBe(64);
    expect(output).toMatch(message);
    expect(output).toMatch(/usage: urlshortener/);
    expect(output).not.toMatch(NO_STACK);
  });
});

describe('a service that cannot start', () => {
  it.each([
    [{ NODE_ENV: 'prod' }, /NODE_ENV="prod": must be one of development, production, test/],
    [
      { NODE_ENV: 'production', SECRET_KEY: 'a'.repeat(32) },
      /SECRET_KEY=\(value hidden\): too weak for NODE_ENV=production: it has only 1 different characters/,
    ],
  ])('with %j: says which setting is wrong, exit 78, no stack', async (env, message) => {
    const { code, output } = await runCli(['serve'], { DATABASE_URL: sqliteUrl('bad-config.db'), ...env });
    expect(code, output).toBe(78);
    expect(output).toMatch(message);
    expect(output).not.toMatch(NO_STACK);
    expect(output).not.toContain('a'.repeat(32));
  });

  it.each([['serve'], ['migrate']])(
    '%s with PostgreSQL unreachable and no start wait: one line naming DATABASE_URL, password hidden, exit 1',
    async (command) => {
      const port = await freePort();
      const url = `postgres://postgres:hunter2@127.0.0.1:${port}/test`;
      // Waiting at start (DB_START_TIMEOUT_MS) has its own suite: test/server/database-start.test.ts.
      const { code, output } = await runCli([command], { DATABASE_URL: url, DB_START_TIMEOUT_MS: '0' });
      expect(code, output).toBe(1);
      expect(output.trim().split('\n')).toEqual([
        `cannot use PostgreSQL at postgres://postgres:***@127.0.0.1:${port}/test (connect ECONNREFUSED 127.0.0.1:${port}); check DATABASE_URL and that the server runs`,
      ]);
    },
  );

  it('with its port taken: one line naming PORT, exit 1', async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as net.AddressInfo;
    try {
      const { code, output } = await runCli(['serve'], {
        DATABASE_URL: sqliteUrl('port-taken.db'),
        HOST: '127.0.0.1',
        PORT: String(port),
        LOG_LEVEL: 'warn',
      });
      expect(code, output).toBe(1);
      expect(output.trim().split('\n')).toEqual([
        `cannot listen on 127.0.0.1:${port}: the port is already in use; check PORT (or stop what holds it)`,
      ]);
    } finally {
      holder.close();
    }
  });

  it('with NATS unreachable: says so within seconds, naming NATS_URL, and serves', async () => {
    const server = await startServer({
      DATABASE_URL: sqliteUrl('nats-away.db'),
      NATS_URL: `nats://127.0.0.1:${await freePort()}`,
    });
    try {
      const started = Date.now();
      await eventually(() => expect(server.output()).toContain('NATS does not answer (check NATS_URL)'), {
        timeoutMs: 10_000,
      });
      expect(Date.now() - started).toBeLessThan(10_000);
      expect((await fetch(`${server.url}/health`)).status).toBe(200);
      // An event to publish waits in the outbox: that is said nowhere else either.
      expect((await shorten(server.url, 'natsaway1')).status).toBe(201);
    } finally {
      expect(await server.stop()).toBe(0);
    }
    expectOneClearLine(server.output(), 'NATS_URL');
  });

  it('with Redis unreachable: says so at once, naming REDIS_URL, and serves', async () => {
    const server = await startServer({
      DATABASE_URL: sqliteUrl('redis-away.db'),
      REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
    });
    try {
      expect(server.output()).toContain('Redis is away (check REDIS_URL if it lasts)');
      expect((await fetch(`${server.url}/health`)).status).toBe(200);
      // A write and a redirect go through the rate limiter and the redirect cache's signal.
      expect((await shorten(server.url, 'redisaway1')).status).toBe(201);
      expect((await fetch(`${server.url}/redisaway1`, { redirect: 'manual' })).status).toBe(302);
    } finally {
      expect(await server.stop()).toBe(0);
    }
    expectOneClearLine(server.output(), 'REDIS_URL');
  });
});

/**
 * Node's on-disk cache of compiled code (src/support/compile-cache.ts): a command's process keeps
 * the service's modules compiled in a private folder of the account's cache home (here
 * XDG_CACHE_HOME, a folder of this file's), on Node 22.1 and later (CI's Node 24 pass runs this
 * file); Node 20 has no such cache. Not in a folder another account can write.
 */
describe('the compile cache', () => {
  const hasCache = typeof (nodeModule as { enableCompileCache?: unknown }).enableCompileCache === 'function';
  const cacheFolder = (home: string) => join(home, 'urlshortener', 'node-compile-cache');
  const cachedFiles = (home: string): number =>
    existsSync(cacheFolder(home))
      ? readdirSync(cacheFolder(home), { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).length
      : 0;
  const openapi = (home: string, env: Record<string, string> = {}) =>
    runCli(['openapi'], { DATABASE_URL: sqliteUrl('compile-cache.db'), XDG_CACHE_HOME: home, ...env });

  it(`holds the modules a command loaded ${hasCache ? 'on this Node' : 'nowhere on Node 20'} (${process.version})`, async () => {
    const home = mkdtempSync(join(dir, 'cache-'));
    const first = await openapi(home);
    expect(first.code, first.output).toBe(0);
    if (!hasCache) {
      expect(existsSync(join(home, 'urlshortener'))).toBe(false);
      return;
    }
    // The CLI's own small modules load before it turns the cache on; the service's (a dozen chunks) after.
    expect(cachedFiles(home)).toBeGreaterThan(5);
    expect(statSync(cacheFolder(home)).mode & 0o777).toBe(0o700);
    const again = await openapi(home);
    expect(again.code, again.output).toBe(0);
    expect(again.output).toBe(first.output);
  });

  it('stays off in a folder other accounts can write, and with NODE_DISABLE_COMPILE_CACHE=1', async () => {
    const shared = mkdtempSync(join(dir, 'cache-'));
    mkdirSync(cacheFolder(shared), { recursive: true });
    chmodSync(cacheFolder(shared), 0o777);
    const sharedRun = await openapi(shared);
    expect(sharedRun.code, sharedRun.output).toBe(0);
    expect(cachedFiles(shared)).toBe(0);

    const home = mkdtempSync(join(dir, 'cache-'));
    const off = await openapi(home, { NODE_DISABLE_COMPILE_CACHE: '1' });
    expect(off.code, off.output).toBe(0);
    expect(existsSync(join(home, 'urlshortener'))).toBe(false);
  });
});
