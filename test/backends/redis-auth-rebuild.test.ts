import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { connectRedis } from '../../src/adapters/redis/connect-redis.js';
import { RedisAuthStateStore } from '../../src/adapters/redis/redis-auth-state-store.js';
import type { RedisCalls } from '../../src/adapters/redis/redis-link.js';
import { KyselyAuthStateStore } from '../../src/adapters/storage/kysely-auth-state-store.js';
import { BackendUnavailableError } from '../../src/domain/errors.js';
import type { DurableAuthStateStore } from '../../src/ports/auth-state-store.js';
import { sqlite } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';
import { useOpenDatabase } from '../helpers/storage.js';

const WINDOW_MS = 15 * 60_000;
const available = sqlite.available && (await redisAvailable());

/**
 * The Redis copy of lockouts and revocations while it is rebuilt from the database. A rebuild
 * copies a snapshot; a change made meanwhile whose own copy fails, or that removes an entry the
 * snapshot still holds, must not end with the copy marked complete and that change missing from
 * it (a lockout undercounted on every instance, or a cleared one back). Real Redis and a real
 * SQLite file; the rebuild's snapshot is held between its read and its copy by a wrapper of the
 * database's store, and a Redis failure is a call that throws what the RedisLink throws when
 * Redis is away (the RedisLink's own suite covers the real outages).
 */
describe('RedisAuthStateStore: changes during a rebuild', () => {
  const { database } = useOpenDatabase(sqlite, { when: available });
  const prefixes: string[] = [];
  const closers: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const close of closers.splice(0)) await close();
    for (const prefix of prefixes) await deleteRedisKeys(prefix);
  });

  /** A store on a Redis prefix of its own, whose first rebuild waits, after its snapshot, for `release()`. */
  const open = (prefix = uniqueRedisPrefix('auth-rebuild')) => {
    prefixes.push(prefix);
    const durable = new KyselyAuthStateStore(database.db);
    let release!: () => void;
    let taken!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const snapshotTaken = new Promise<void>((resolve) => (taken = resolve));
    const held: DurableAuthStateStore = Object.assign(Object.create(durable) as KyselyAuthStateStore, {
      async snapshot() {
        const snapshot = await durable.snapshot();
        taken();
        await released;
        return snapshot;
      },
    });
    const failing = { next: 0, all: false };
    const calls: RedisCalls = {
      call: (operation) => {
        if (failing.all || failing.next > 0) {
          failing.next = Math.max(0, failing.next - 1);
          return Promise.reject(new BackendUnavailableError('redis'));
        }
        return operation();
      },
    };
    const store = new RedisAuthStateStore(held, connectRedis(REDIS_URL, 'auth-rebuild-test'), {
      keyPrefix: prefix,
      calls,
    });
    closers.push(() => {
      release(); // a rebuild still held would hold close() too
      return store.close();
    });
    return { store, prefix, release, snapshotTaken, failing };
  };

  const redis = () => {
    const client = connectRedis(REDIS_URL, 'auth-rebuild-check');
    closers.push(() => client.quit().then(() => undefined));
    return client;
  };
  const who = () => `user-${randomUUID()}`;

  /**
   * A store's first rebuild held after its snapshot (which holds no failure of the subject), and
   * meanwhile a failure of the subject recorded with Redis failing as `failRedis` sets it (then
   * answering again); the rebuild is still held.
   */
  const failureDuringRebuild = async (failRedis: (failing: { next: number; all: boolean }) => void) => {
    const opened = open();
    const subject = who();
    const rebuilt = opened.store.rebuild();
    await opened.snapshotTaken;
    failRedis(opened.failing);
    expect((await opened.store.recordFailure(subject, WINDOW_MS)).count).toBe(1);
    opened.failing.all = false;
    return { ...opened, subject, rebuilt };
  };

  it('a lockout cleared while a rebuild runs stays cleared, on this instance and on another', async (ctx) => {
    if (!available) return ctx.skip();
    const { store, prefix, release, snapshotTaken } = open();
    const subject = who();
    await store.recordFailure(subject, WINDOW_MS);
    await store.recordFailure(subject, WINDOW_MS);
    const rebuilt = store.rebuild();
    await snapshotTaken; // holds the two failures
    await store.clearFailures(subject);
    release();
    await rebuilt;
    expect(await store.failures(subject)).toBeUndefined();
    // Once a later rebuild has marked the copy complete, the copy says so too.
    const client = redis();
    await eventually(async () => expect(await client.exists(`${prefix}auth:seeded`)).toBe(1));
    expect(await client.get(`${prefix}auth:failures:${subject}`)).toMatch(/^0:/); // the cleared record
    expect(await store.failures(subject)).toBeUndefined();
    expect(await open(prefix).store.failures(subject)).toBeUndefined();
  });

  it('a failure whose copy failed while a rebuild ran is counted, not hidden by the rebuild', async (ctx) => {
    if (!available) return ctx.skip();
    const { store, prefix, release, subject, rebuilt } = await failureDuringRebuild((failing) => {
      failing.next = 1; // the copy fails; telling Redis the copy is incomplete works
    });
    release();
    await rebuilt;
    expect((await store.failures(subject))?.count).toBe(1);
    const client = redis();
    await eventually(async () => expect(await client.get(`${prefix}auth:failures:${subject}`)).toMatch(/^1:/));
    expect(await client.exists(`${prefix}auth:seeded`)).toBe(1);
    expect((await store.failures(subject))?.count).toBe(1);
  });

  it('Redis away for the copy and for saying so: the rebuild asked for when it is back starts anew', async (ctx) => {
    if (!available) return ctx.skip();
    const {
      store,
      prefix,
      release,
      subject,
      rebuilt: first,
    } = await failureDuringRebuild((failing) => {
      failing.all = true; // neither the copy nor telling Redis the copy is incomplete reaches it
    });
    const again = store.rebuild(); // what the RedisLink's onBack asks for, Redis answering again
    release();
    await first;
    await again;
    const client = redis();
    expect(await client.exists(`${prefix}auth:seeded`)).toBe(1);
    expect(await client.get(`${prefix}auth:failures:${subject}`)).toMatch(/^1:/);
    expect((await store.failures(subject))?.count).toBe(1);
  });
});
