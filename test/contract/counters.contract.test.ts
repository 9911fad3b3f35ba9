import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventEmitter } from 'node:events';
import { ClusterCounters, type CounterChannel, serveCounters } from '../../src/adapters/counters/cluster-counters.js';
import { MemoryCounters } from '../../src/adapters/counters/memory-counters.js';
import { RedisCounters } from '../../src/adapters/counters/redis-counters.js';
import { connectRedis } from '../../src/adapters/redis/connect-redis.js';
import type { Counters } from '../../src/ports/counters.js';
import { ManualClock } from '../helpers/auth.js';
import { deleteRedisKeys, uniqueRedisPrefix } from '../helpers/redis.js';
import { REDIS_URL, redisAvailable } from '../helpers/services.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Adapter {
  readonly name: string;
  available(): Promise<boolean>;
  /** A fresh, isolated store. */
  create(): Counters;
  /** A second handle on the same store, as another instance would hold, when the adapter is shared. */
  peer?(first: Counters): Counters;
}

// One key prefix per run, so runs (and CI jobs) sharing a Redis never see each other's keys.
const runPrefix = uniqueRedisPrefix('counters');
let stores = 0;
const prefixes = new WeakMap<Counters, string>();

/**
 * Both ends of an IPC channel as a cluster has them (a worker's `process`, the primary's
 * `Worker`): each message arrives later, JSON-encoded and decoded, at the other end.
 */
function channelPair(): [CounterChannel, CounterChannel] {
  const ends = [new EventEmitter(), new EventEmitter()] as const;
  const end = (own: EventEmitter, other: EventEmitter): CounterChannel => ({
    send: (message) => setImmediate(() => other.emit('message', JSON.parse(JSON.stringify(message)))),
    on: (event, listener) => own.on(event, listener),
    off: (event, listener) => own.off(event, listener),
  });
  return [end(ends[0], ends[1]), end(ends[1], ends[0])];
}

/** The store a cluster's primary keeps, reached by each worker through its own channel. */
const primaries = new WeakMap<Counters, MemoryCounters>();
function clusterWorker(store: MemoryCounters): Counters {
  const [worker, primary] = channelPair();
  serveCounters(store, primary);
  const counters = new ClusterCounters(worker);
  primaries.set(counters, store);
  return counters;
}

const ADAPTERS: readonly Adapter[] = [
  { name: 'memory', available: async () => true, create: () => new MemoryCounters() },
  {
    name: 'cluster (kept by the primary)',
    available: async () => true,
    create: () => clusterWorker(new MemoryCounters()),
    peer: (first) => clusterWorker(primaries.get(first)!),
  },
  {
    name: 'redis',
    available: redisAvailable,
    create: () => {
      const prefix = `${runPrefix}${++stores}:`;
      const counters = new RedisCounters(connectRedis(REDIS_URL, 'test'), prefix);
      prefixes.set(counters, prefix);
      return counters;
    },
    peer: (first) => new RedisCounters(connectRedis(REDIS_URL, 'test'), prefixes.get(first)!),
  },
];

/** One contract, every counters adapter. */
describe.each(ADAPTERS)('Counters on $name', (adapter) => {
  let available = false;
  const opened: Counters[] = [];
  const open = (counters: Counters) => {
    opened.push(counters);
    return counters;
  };
  const fresh = () => open(adapter.create());

  beforeAll(async () => {
    available = await adapter.available();
  });
  afterAll(async () => {
    await Promise.all(opened.map((c) => c.close()));
    if (available && adapter.name === 'redis') await deleteRedisKeys(runPrefix);
  });

  it('counts hits one by one from 1', async (ctx) => {
    if (!available) return ctx.skip();
    const counters = fresh();
    expect(await counters.get('a')).toBeUndefined();
    expect(await counters.increment('a', 60_000)).toBe(1);
    expect(await counters.increment('a', 60_000)).toBe(2);
    expect(await counters.increment('b', 60_000)).toBe(1);
    const state = await counters.get('a');
    expect(state?.count).toBe(2);
    expect(state!.ttlMs).toBeGreaterThan(59_000);
    expect(state!.ttlMs).toBeLessThanOrEqual(60_000);
  });

  it('is atomic under concurrent increments', async (ctx) => {
    if (!available) return ctx.skip();
    const counters = fresh();
    const results = await Promise.all(Array.from({ length: 50 }, () => counters.increment('hot', 60_000)));
    expect([...results].sort((x, y) => x - y)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect((await counters.get('hot'))?.count).toBe(50);
  });

  it('expires a counter ttl after its last hit, each hit resetting the window (sliding)', async (ctx) => {
    if (!available) return ctx.skip();
    const counters = fresh();
    await counters.increment('slide', 1000);
    await sleep(600);
    await counters.increment('slide', 1000); // resets the window: alive until ~1600 ms from the start
    await sleep(600);
    // Past the first hit's expiry (1000 ms), before the second's.
    expect((await counters.get('slide'))?.count).toBe(2);
    await sleep(600);
    expect(await counters.get('slide')).toBeUndefined();
    expect(await counters.increment('slide', 1000)).toBe(1);
  });

  it('deletes a counter', async (ctx) => {
    if (!available) return ctx.skip();
    const counters = fresh();
    await counters.increment('gone', 60_000);
    await counters.delete('gone');
    expect(await counters.get('gone')).toBeUndefined();
    await counters.delete('never-there');
  });

  it('keeps a flag until its ttl passes, and ignores a non-positive ttl', async (ctx) => {
    if (!available) return ctx.skip();
    const counters = fresh();
    expect(await counters.hasFlag('f')).toBe(false);
    await counters.setFlag('f', 300);
    expect(await counters.hasFlag('f')).toBe(true);
    await counters.setFlag('expired', 0);
    await counters.setFlag('negative', -5);
    expect(await counters.hasFlag('expired')).toBe(false);
    expect(await counters.hasFlag('negative')).toBe(false);
    await sleep(450);
    expect(await counters.hasFlag('f')).toBe(false);
  });

  it('bumps versions that never expire, from 0', async (ctx) => {
    if (!available) return ctx.skip();
    const counters = fresh();
    expect(await counters.version('v')).toBe(0);
    expect(await counters.bump('v')).toBe(1);
    expect(await counters.bump('v')).toBe(2);
    expect(await counters.version('v')).toBe(2);
    expect(await counters.version('other')).toBe(0);
  });

  it('keeps separate stores apart', async (ctx) => {
    if (!available) return ctx.skip();
    const a = fresh();
    const b = fresh();
    await a.increment('k', 60_000);
    await a.setFlag('f', 60_000);
    await a.bump('v');
    expect(await b.get('k')).toBeUndefined();
    expect(await b.hasFlag('f')).toBe(false);
    expect(await b.version('v')).toBe(0);
  });

  // Only shared adapters have a peer: the memory adapter is one process's own state.
  if (adapter.peer !== undefined) {
    it('shares state with another connection on the same store', async (ctx) => {
      if (!available) return ctx.skip();
      const a = fresh();
      const b = open(adapter.peer!(a));
      await a.increment('shared', 60_000);
      expect(await b.increment('shared', 60_000)).toBe(2);
      await b.setFlag('revoked', 60_000);
      expect(await a.hasFlag('revoked')).toBe(true);
      await a.bump('settings');
      expect(await b.version('settings')).toBe(1);
      await b.delete('shared');
      expect(await a.get('shared')).toBeUndefined();
    });
  }
});

describe('MemoryCounters with an injected clock', () => {
  it('expires by the clock, not by wall time', async () => {
    const clock = new ManualClock();
    const counters = new MemoryCounters(clock);
    await counters.increment('k', 1000);
    await counters.setFlag('f', 1000);
    await counters.bump('v');
    clock.advance(999);
    expect(await counters.get('k')).toEqual({ count: 1, ttlMs: 1 });
    expect(await counters.hasFlag('f')).toBe(true);
    clock.advance(1);
    expect(await counters.get('k')).toBeUndefined();
    expect(await counters.hasFlag('f')).toBe(false);
    clock.advance(365 * 24 * 3_600_000);
    expect(await counters.version('v')).toBe(1);
  });

  it('sweeps expired entries so memory follows what is live', async () => {
    const clock = new ManualClock();
    const counters = new MemoryCounters(clock);
    for (let i = 0; i < 1000; i++) await counters.increment(`old${i}`, 10);
    clock.advance(11);
    for (let i = 0; i < 100; i++) await counters.increment(`new${i}`, 10_000);
    const size = (counters as unknown as { entries: Map<string, unknown> }).entries.size;
    expect(size).toBeLessThanOrEqual(100);
  });
});
