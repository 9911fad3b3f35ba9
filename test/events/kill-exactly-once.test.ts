/**
 * A `kill -9` between the answer and the publish (issue #5; design: "a request that changed data
 * and answered success has its event durably recorded"): the built server is killed with
 * SIGKILL after acknowledging writes whose events it has not published yet, restarted, and each
 * acknowledged change's event reaches each consumer group exactly once: the service's own
 * `event-store` group (its table) and a fresh group of this test reading from the earliest.
 */
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedLogEventBus } from '../../src/adapters/event-bus/embedded-log/embedded-log-event-bus.js';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { NatsEventBus } from '../../src/adapters/event-bus/nats-event-bus.js';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import { TOPICS } from '../../src/domain/events.js';
import type { EventBus, Subscription } from '../../src/ports/event-bus.js';
import { sqlite, testConfig, type TestDatabase } from '../helpers/backends.js';
import { FAST_BUS } from '../helpers/event-buses.js';
import { eventually } from '../helpers/eventually.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { natsServerBinaryAvailable, OwnNatsServer } from '../helpers/own-nats-server.js';
import { storedCreatedByCode } from '../helpers/event-store.js';
import { connectTestNatsBus } from '../helpers/nats.js';
import { fetchShorten } from '../helpers/http.js';

const shorten = (server: ServerProcess, code: string) =>
  fetchShorten(server.url, { code, url: `https://example.com/${code}` });

/** Short leases, so the restarted process takes over the killed one's relay and partitions quickly. */
const FAST_ENV = { EVENT_LEASE_MS: '1000', EVENT_POLL_MS: '50', CLICK_FLUSH_INTERVAL_MS: '60000' };

/** Deliveries of url.created events to a fresh group of the test, by code. */
async function countingGroup(bus: EventBus) {
  const deliveries = new Map<string, number>();
  const eventIds = new Map<string, Set<string>>();
  const subscription: Subscription = await bus.subscribe({
    group: `exactly-once-${randomBytes(3).toString('hex')}`,
    topic: TOPICS.url,
    startAt: 'earliest',
    handler: async (message) => {
      if (message.envelope.event_type !== 'url.created') return;
      const code = (message.envelope.payload as { code: string }).code;
      deliveries.set(code, (deliveries.get(code) ?? 0) + 1);
      eventIds.set(code, (eventIds.get(code) ?? new Set()).add(message.envelope.event_id));
    },
  });
  return { deliveries, eventIds, subscription };
}

/** Each acknowledged code: one event in the store and one delivery to the test's group; nothing twice. */
async function expectExactlyOnce(
  db: Kysely<EventTables>,
  group: Awaited<ReturnType<typeof countingGroup>>,
  acknowledged: readonly string[],
) {
  await eventually(
    async () => {
      const stored = await storedCreatedByCode(db);
      for (const code of acknowledged) {
        expect(stored.get(code), code).toHaveLength(1);
        expect(group.deliveries.get(code), code).toBe(1);
      }
    },
    { timeoutMs: 20_000, intervalMs: 100 },
  );
  // Longer than a lease and a redelivery: anything delivered twice would have shown by now.
  await new Promise((resolve) => setTimeout(resolve, 2500));
  const stored = await storedCreatedByCode(db);
  for (const code of acknowledged) {
    expect(stored.get(code), code).toHaveLength(1);
    expect(group.deliveries.get(code), code).toBe(1);
    expect([...group.eventIds.get(code)!], code).toEqual(stored.get(code));
  }
  for (const [code, n] of group.deliveries) expect(n, `${code} delivered ${n} times`).toBe(1);
  for (const [code, ids] of stored) expect(ids, code).toHaveLength(1);
}

describe('kill -9 between the answer and the publish, on NATS JetStream', () => {
  const ok = natsServerBinaryAvailable();
  let nats: OwnNatsServer;
  let database: TestDatabase;
  const servers: ServerProcess[] = [];
  const databases: Database[] = [];
  const buses: NatsEventBus[] = [];

  beforeAll(async () => {
    if (!ok) return;
    nats = await OwnNatsServer.create();
    database = await sqlite.create();
  });
  afterAll(async () => {
    for (const s of servers) await s.stop('SIGKILL');
    await buses[0]?.destroy().catch(() => undefined);
    for (const b of buses) await b.close().catch(() => undefined);
    for (const d of databases) await d.close();
    await nats?.destroy();
    await database?.drop();
  });

  it.skipIf(!ok)(
    'the events wait in the outbox through the kill and are delivered once after the restart',
    async () => {
      const prefix = `xo${randomBytes(4).toString('hex')}_`;
      const env = { DATABASE_URL: database.databaseUrl, NATS_URL: nats.url, NATS_PREFIX: prefix, ...FAST_ENV };
      await nats.start();
      const first = await startServer(env);
      servers.push(first);
      // The broker goes away: from now on the relay cannot publish anything.
      await nats.stop();

      const acknowledged: string[] = [];
      for (let i = 0; i < 8; i++) {
        const code = `xon${String(i).padStart(5, '0')}`;
        const res = await shorten(first, code);
        expect(res.status, await res.text()).toBe(201);
        acknowledged.push(code);
      }
      expect(await first.stop('SIGKILL')).toBeNull(); // killed by the signal, no chance to drain

      // Between the answer and the publish: the events are in the outbox, recorded with the change.
      const db = openDatabase(testConfig(database.databaseUrl).database);
      databases.push(db);
      const store = db.db as unknown as Kysely<EventTables>;
      const outbox = await store.selectFrom('event_outbox').select(['envelope']).execute();
      const waiting = outbox.map((r) => (JSON.parse(r.envelope) as { payload: { code: string } }).payload.code);
      expect(waiting.sort()).toEqual(expect.arrayContaining(acknowledged));
      expect(await storedCreatedByCode(store)).toEqual(new Map());

      await nats.start();
      const restarted = await startServer(env);
      servers.push(restarted);
      const bus = await connectTestNatsBus(nats.url, prefix);
      buses.push(bus);
      const group = await countingGroup(bus);
      await expectExactlyOnce(store, group, acknowledged);
      expect(await store.selectFrom('event_outbox').select('id').execute()).toEqual([]);
      await group.subscription.close();
      expect(await restarted.stop('SIGTERM')).toBe(0);
    },
  );
});

describe('kill -9 right after the 201, on the embedded bus', () => {
  let database: TestDatabase;
  const servers: ServerProcess[] = [];
  const databases: Database[] = [];
  const buses: EventBus[] = [];

  beforeAll(async () => {
    database = await sqlite.create();
  });
  afterAll(async () => {
    for (const s of servers) await s.stop('SIGKILL');
    for (const b of buses) await b.close().catch(() => undefined);
    for (const d of databases) await d.close();
    await database?.drop();
  });

  it('every acknowledged change has its event, delivered once to each group after the restart', async () => {
    const env = { DATABASE_URL: database.databaseUrl, ...FAST_ENV };
    const server = await startServer(env);
    servers.push(server);
    const acknowledged: string[] = [];
    let killed = false;
    // Many writes in flight; the process is killed the moment the 20th acknowledgement arrives,
    // while the relay is busy handing the latest events to the log.
    const attempts = Array.from({ length: 50 }, (_, i) => `xoe${String(i).padStart(5, '0')}`).map(async (code) => {
      try {
        const res = await shorten(server, code);
        if (res.status === 201 && !killed) {
          acknowledged.push(code);
          if (acknowledged.length === 20) {
            killed = true;
            server.child.kill('SIGKILL');
          }
        }
      } catch {
        // the connection died with the process: not acknowledged
      }
    });
    await Promise.all(attempts);
    await server.stop('SIGKILL');
    expect(acknowledged.length).toBeGreaterThanOrEqual(20);

    const restarted = await startServer(env);
    servers.push(restarted);
    const db = openDatabase(testConfig(database.databaseUrl).database);
    databases.push(db);
    const store = db.db as unknown as Kysely<EventTables>;
    const bus = new EmbeddedLogEventBus(db.db, FAST_BUS);
    buses.push(bus);
    const group = await countingGroup(bus);
    await expectExactlyOnce(store, group, acknowledged);
    // One log entry per event: the relay's re-publication after the crash was dropped.
    const log = await store.selectFrom('event_log').select('message_id').where('topic', '=', TOPICS.url).execute();
    expect(new Set(log.map((r) => r.message_id)).size).toBe(log.length);
    expect(await store.selectFrom('event_outbox').select('id').execute()).toEqual([]);
    await group.subscription.close();
    expect(await restarted.stop('SIGTERM')).toBe(0);
  });
});
