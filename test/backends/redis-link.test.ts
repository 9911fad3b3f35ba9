import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { RedisAuthStateStore } from '../../src/adapters/redis/redis-auth-state-store.js';
import { RedisLink } from '../../src/adapters/redis/redis-link.js';
import { KyselyAuthStateStore } from '../../src/adapters/storage/kysely-auth-state-store.js';
import { BackendUnavailableError } from '../../src/domain/errors.js';
import { sqlite } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { OwnRedisServer, redisServerBinaryAvailable } from '../helpers/own-redis-server.js';
import { useOpenDatabase } from '../helpers/storage.js';

const TIMEOUT_MS = 200;

/** Resolves with how long `work` took, and what it settled with. */
async function timed<T>(work: () => Promise<T>): Promise<{ ms: number; result: T | Error }> {
  const start = performance.now();
  const result = await work().catch((error: Error) => error);
  return { ms: performance.now() - start, result };
}

/**
 * A RedisLink against a redis-server the test stops, restarts and pauses: every call answers
 * within its deadline, calls fail at once while Redis is away, the log says "away" once and
 * "back" once per outage, and nothing prints "Unhandled error event".
 */
describe('RedisLink with Redis going away and coming back', () => {
  const available = redisServerBinaryAvailable();
  let server: OwnRedisServer;
  let link: RedisLink;
  const { database } = useOpenDatabase(sqlite, { when: available });
  /** The link's log lines, each with its fields and when (ms since the suite began). */
  const lines: { readonly message: string; readonly fields: unknown; readonly ms: number }[] = [];
  const consoleErrors = vi.spyOn(console, 'error');
  const began = Date.now();
  const said = (fields: unknown, message: string) => lines.push({ message, fields, ms: Date.now() - began });
  /** The log as text: a failure's message. */
  const log = () => lines.map((line) => `${line.ms} ms ${line.message} ${JSON.stringify(line.fields)}`).join('\n');

  beforeAll(async () => {
    if (!available) return;
    server = await OwnRedisServer.create();
    await server.start();
    link = new RedisLink({
      url: server.url,
      timeoutMs: TIMEOUT_MS,
      probeIntervalMs: 300,
      logger: { info: (o, message) => said(o, message), warn: (o, message) => said(o, message) },
    });
  });
  afterEach(async () => {
    server?.resume();
    await server?.start();
  });
  afterAll(async () => {
    await link?.close();
    await server?.stop();
    expect(consoleErrors.mock.calls.flat().join('\n')).not.toMatch(/Unhandled error event/);
  });

  const away = () => lines.filter((line) => line.message.startsWith('Redis is away')).length;
  const back = () => lines.filter((line) => line.message === 'Redis is back').length;

  it('fails fast while Redis is stopped, says so once, and is back once it restarts', async (ctx) => {
    if (!available) return ctx.skip();
    const [a, b] = [link.connect('a'), link.connect('b')];
    await eventually(() => a.status === 'ready' && b.status === 'ready');
    expect(await link.call(() => a.set('k', '1'))).toBe('OK');
    lines.length = 0;

    await server.stop();
    const first = await timed(() => link.call(() => a.get('k')));
    expect(first.result).toBeInstanceOf(BackendUnavailableError);
    expect(first.ms).toBeLessThan(TIMEOUT_MS + 500);
    for (let i = 0; i < 20; i++) {
      const next = await timed(() => link.call(() => b.get('k')));
      expect(next.result).toBeInstanceOf(BackendUnavailableError);
      expect(next.ms).toBeLessThan(TIMEOUT_MS + 100);
    }
    await expect(link.ping()).rejects.toBeInstanceOf(BackendUnavailableError);
    expect(link.available).toBe(false);

    await new Promise((resolve) => setTimeout(resolve, 2500)); // several reconnection attempts
    await server.start();
    await eventually(() => link.available, { timeoutMs: 5000 });
    expect(await link.call(() => a.get('k'))).toBeNull(); // it came back empty
    expect(await link.call(() => b.set('k', '2'))).toBe('OK');
    expect({ away: away(), back: back() }, log()).toEqual({ away: 1, back: 1 });
  });

  it('gives up on a paused Redis at the deadline, then fails at once, and probes its way back', async (ctx) => {
    if (!available) return ctx.skip();
    const client = link.connect('paused');
    await eventually(() => client.status === 'ready' && link.available);
    lines.length = 0;

    server.pause();
    const first = await timed(() => link.call(() => client.get('k')));
    expect(first.result).toBeInstanceOf(BackendUnavailableError);
    expect(first.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    expect(first.ms).toBeLessThan(TIMEOUT_MS + 500);
    const slowest = Math.max(
      ...(await Promise.all(Array.from({ length: 50 }, () => timed(() => link.call(() => client.get('k')))))).map(
        (call) => call.ms,
      ),
    );
    // The probe among them waits for its deadline; the others fail at once.
    expect(slowest).toBeLessThan(TIMEOUT_MS + 500);

    server.resume();
    await eventually(() => link.call(() => client.get('k')).then(() => true), { timeoutMs: 5000, intervalMs: 50 });
    expect(link.available).toBe(true);
    expect({ away: away(), back: back() }, log()).toEqual({ away: 1, back: 1 });
  });

  it('reads revocations from the database while Redis is away, and rebuilds the copy once it is back empty', async (ctx) => {
    if (!available) return ctx.skip();
    const durable = new KyselyAuthStateStore(database.db);
    const store = new RedisAuthStateStore(durable, link.connect('auth-state'), { keyPrefix: 'p:', calls: link });
    link.onBack(() => void store.rebuild());
    const probe = link.connect('probe');
    await eventually(() => link.available && probe.status === 'ready');
    const [before, during] = [randomUUID(), randomUUID()];
    await store.revoke('token', before, Date.now() + 60_000);
    expect(await store.isRevoked('token', before)).toBe(true);
    await eventually(async () => expect(await probe.exists('p:auth:seeded')).toBe(1));

    await server.stop();
    const check = await timed(() => store.isRevoked('token', before));
    expect(check.result).toBe(true);
    expect(check.ms).toBeLessThan(TIMEOUT_MS + 500);
    await store.revoke('token', during, Date.now() + 60_000); // recorded in the database only
    await store.recordFailure('alice', 60_000);
    expect(await store.isRevoked('token', during)).toBe(true);

    await server.start();
    await eventually(async () => expect(await probe.exists('p:auth:seeded')).toBe(1), { timeoutMs: 5000 });
    expect(await probe.exists(`p:auth:revoked:token:${before}`, `p:auth:revoked:token:${during}`)).toBe(2);
    expect(await probe.get('p:auth:failures:alice')).toMatch(/^1:/);
    expect(await store.isRevoked('token', during)).toBe(true);
  });
});
