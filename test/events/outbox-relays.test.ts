/**
 * The relay against the commit-order race, in one process and at the level of its parts: writer
 * transactions take outbox ids and commit in a shuffled order (each waits a random moment before
 * its commit), while two relays of two "instances" (each its own pool and NATS connection) run,
 * one holding the lease and the other draining again and again as a shutdown would, regardless
 * of the lease. Every event reaches the stream exactly once (JetStream drops the repeated event
 * ids of the two relays), and the outbox ends empty.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsEventBus } from '../../src/adapters/event-bus/nats-event-bus.js';
import { TransactionalOutbox } from '../../src/adapters/event-bus/outbox.js';
import { OutboxRelay } from '../../src/adapters/event-bus/outbox-relay.js';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import { migrateToLatest } from '../../src/adapters/storage/migrations.js';
import { createEvent, EVENT_TYPES, TOPICS } from '../../src/domain/events.js';
import { postgres, testConfig, type TestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { census, createdInStream, outboxRows } from '../helpers/outbox-census.js';
import { NATS_URL, natsAvailable } from '../helpers/services.js';
import { connectTestNatsBus } from '../helpers/nats.js';

const WRITES = 600;
const WRITERS = 24;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('two outbox relays, writers committing out of id order (PostgreSQL, NATS)', async () => {
  const ok = postgres.available && (await natsAvailable());
  const prefix = `trl${randomBytes(4).toString('hex')}_`;
  let testDb: TestDatabase;
  const databases: Database[] = [];
  const buses: NatsEventBus[] = [];
  const relays: OutboxRelay[] = [];

  /** One instance: its own pool, bus, outbox and relay. */
  async function instance() {
    const database = openDatabase(testConfig(testDb.databaseUrl).database);
    databases.push(database);
    const bus = await connectTestNatsBus(NATS_URL, prefix, 2000);
    buses.push(bus);
    const outbox = new TransactionalOutbox('urlshortener');
    const relay = new OutboxRelay(
      database.db,
      bus,
      outbox,
      { pollMs: 20, batchSize: 50, leaseMs: 1000, retryDelayMs: 50 },
      { warn: () => undefined },
    );
    relays.push(relay);
    return { database, outbox, relay };
  }

  beforeAll(async () => {
    if (!ok) return;
    testDb = await postgres.create();
    const first = openDatabase(testConfig(testDb.databaseUrl).database);
    await migrateToLatest(first.db, first.dialect);
    await first.close();
  });
  afterAll(async () => {
    if (!ok) return;
    for (const relay of relays) await relay.stop();
    await buses[0]?.destroy();
    for (const bus of buses) await bus.close();
    for (const database of databases) await database.close();
    await testDb.drop();
  });

  it.skipIf(!ok)(`${WRITES} events: each reaches the stream exactly once`, async () => {
    const a = await instance();
    const b = await instance();
    a.relay.start();
    b.relay.start();
    const codes = Array.from({ length: WRITES }, (_, n) => `rl${String(n).padStart(6, '0')}`);
    let next = 0;
    const writer = async (through: typeof a) => {
      for (let n = next++; n < WRITES; n = next++) {
        const code = codes[n]!;
        const event = createEvent(
          EVENT_TYPES.urlCreated,
          { code },
          { service: 'urlshortener', topic: TOPICS.url, key: code },
        );
        await through.database.db.transaction().execute(async (trx) => {
          await through.outbox.append(trx, [event]);
          await sleep(Math.random() * 15); // the id is taken; the commit comes later, in no set order
        });
        through.outbox.notify();
      }
    };
    let writing = true;
    const drains = (async () => {
      while (writing) {
        await b.relay.drain().catch(() => undefined);
        await sleep(5);
      }
    })();
    await Promise.all(Array.from({ length: WRITERS }, (_, i) => writer(i % 2 === 0 ? a : b)));
    writing = false;
    await drains;
    await eventually(async () => expect(await outboxRows(testDb.databaseUrl)).toBe(0), { timeoutMs: 20_000 });
    const result = census(codes, await createdInStream(NATS_URL, prefix));
    expect({ missing: result.missing.length, duplicated: result.duplicated.length, found: result.found }).toEqual({
      missing: 0,
      duplicated: 0,
      found: WRITES,
    });
  });
});
