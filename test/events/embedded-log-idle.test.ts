/**
 * The embedded log reads a partition from its table only when the partition's committed end is
 * past the consumer (PartitionEnds, GroupConsumer.read): an idle consumer stops reading it every
 * poll interval, yet every entry still arrives, whether another process wrote it, this process
 * wrote it (from memory), or this process committed it without memory ever being told. And an
 * entry handled again because its position's commit failed comes as a redelivery.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EmbeddedLogEventBus } from '../../src/adapters/event-bus/embedded-log/embedded-log-event-bus.js';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import { migrateToLatest } from '../../src/adapters/storage/migrations.js';
import { createEvent } from '../../src/domain/events.js';
import type { BusMessage } from '../../src/ports/event-bus.js';
import { BACKENDS, testConfig, type TestDatabase } from '../helpers/backends.js';
import { FAST_BUS } from '../helpers/event-buses.js';
import { eventually } from '../helpers/eventually.js';

const HEADERS = { event_type: 'test.event', service: 'urlshortener', traceparent: '', tracestate: '' };
const TOPIC = 'idle-log';
const event = (key: string) => createEvent('test.event', { id: key }, { service: 'urlshortener', topic: TOPIC, key });
/** How a consumer's read of the log's table begins (the table's name quoted, as Kysely writes it). */
const LOG_READ = `select * from ${JSON.stringify('event_log')}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The PostgreSQL URL with `application_name` set, so that the test can find its connections. */
function withApplicationName(databaseUrl: string, name: string): string {
  const url = new URL(databaseUrl);
  url.searchParams.set('application_name', name);
  return url.toString();
}

describe.each(BACKENDS)('the embedded log on $name, idle', (backend) => {
  let testDb: TestDatabase;
  let databases: Database[];
  /** Reads of the log's table by the consumer's connection. */
  let tableReads: number;

  beforeEach(async () => {
    if (!backend.available) return;
    testDb = await backend.create();
    databases = [];
    tableReads = 0;
  });

  afterEach(async () => {
    if (!backend.available) return;
    await Promise.all(databases.map((d) => d.close()));
    await testDb.drop();
  });

  /**
   * A connection of its own to the test database (the first one migrates); `counted`: its log
   * reads are counted; `name`: PostgreSQL's application_name of its connections.
   */
  async function connect(counted = false, name?: string): Promise<Database> {
    const url = name === undefined ? testDb.databaseUrl : withApplicationName(testDb.databaseUrl, name);
    const database = openDatabase(testConfig(url).database, {
      log: (e) => {
        if (counted && e.level === 'query' && e.query.sql.startsWith(LOG_READ)) tableReads++;
      },
    });
    if (databases.length === 0) await migrateToLatest(database.db, database.dialect);
    databases.push(database);
    return database;
  }

  /** A bus on a connection of its own, with a consumer collecting what it receives (by payload id). */
  async function consumer(name?: string) {
    const database = await connect(true, name);
    const bus = new EmbeddedLogEventBus(database.db, FAST_BUS);
    const received: string[] = [];
    const redelivered: string[] = [];
    /** Every delivery: the payload id and the message's deliveryCount. */
    const deliveries: Array<readonly [string, number]> = [];
    await bus.subscribe({
      group: `idle-${randomBytes(3).toString('hex')}`,
      topic: TOPIC,
      startAt: 'earliest',
      handler: async (m: BusMessage) => {
        const id = (m.envelope.payload as { id: string }).id;
        received.push(id);
        deliveries.push([id, m.deliveryCount]);
        if (m.deliveryCount > 1) redelivered.push(id);
      },
    });
    return { database, bus, received, redelivered, deliveries };
  }

  /** Runs test/fixtures/log-publisher.ts: another process publishing `count` events, each its own commit. */
  function publisherProcess(count: number, prefix: string): Promise<void> {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'test/fixtures/log-publisher.ts', TOPIC, String(count), prefix],
      { env: { ...process.env, DATABASE_URL: testDb.databaseUrl }, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    return new Promise((resolve, reject) => {
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.on('exit', (code) =>
        code === 0 && output.includes('published') ? resolve() : reject(new Error(`publisher exited ${code}`)),
      );
    });
  }

  const ids = (prefix: string, count: number) => Array.from({ length: count }, (_, n) => `${prefix}-${n}`);

  it.skipIf(!backend.available)(
    'stops reading its table while nothing is written, and reads it again when another connection commits',
    async () => {
      const { bus, received } = await consumer();
      await sleep(300); // the first reads of each partition
      const before = tableReads;
      await sleep(1000); // 20 poll intervals of FAST_BUS
      // Without the check, every partition was read every poll interval: 4 × 20 reads.
      expect(tableReads - before).toBeLessThanOrEqual(FAST_BUS.partitions);

      const other = new EmbeddedLogEventBus((await connect()).db, FAST_BUS);
      for (const key of ids('other', 5)) await other.publish(TOPIC, key, HEADERS, event(key).envelope);
      await eventually(() => expect(received.sort()).toEqual(ids('other', 5).sort()), { timeoutMs: 5_000 });
      await other.close();
      await bus.close();
    },
  );

  it.skipIf(!backend.available)(
    'delivers every entry written at once by two other processes and this one, each exactly once here',
    async () => {
      const { bus, received } = await consumer();
      await sleep(300);
      const own = (async () => {
        for (const key of ids('own', 100)) await bus.publish(TOPIC, key, HEADERS, event(key).envelope);
      })();
      await Promise.all([publisherProcess(150, 'first'), publisherProcess(150, 'second'), own]);
      const expected = [...ids('first', 150), ...ids('second', 150), ...ids('own', 100)].sort();
      await eventually(() => expect(received.length).toBeGreaterThanOrEqual(expected.length), { timeoutMs: 15_000 });
      await sleep(300); // nothing more, nothing twice
      expect([...received].sort()).toEqual(expected);
      await bus.close();
    },
    60_000,
  );

  it.skipIf(!backend.available || backend.name !== 'postgres')(
    "delivers every entry of two other processes while the consumer's connections are dropped again and again",
    async () => {
      const name = `idle-consumer-${randomBytes(3).toString('hex')}`;
      const { bus, received, redelivered } = await consumer(name);
      await sleep(300);
      const admin = await connect();
      let dropped = 0;
      let publishing = true;
      // Every 150 ms, every connection of the consumer's process (its reads of the partitions'
      // ends, of the log, its position commits) is terminated by the server.
      const dropping = (async () => {
        while (publishing) {
          const { rows } = await sql<{ dropped: boolean }>`
            SELECT pg_terminate_backend(pid) AS dropped FROM pg_stat_activity WHERE application_name = ${name}`.execute(
            admin.db,
          );
          dropped += rows.filter((r) => r.dropped).length;
          await sleep(150);
        }
      })();
      await Promise.all([publisherProcess(150, 'first'), publisherProcess(150, 'second')]);
      publishing = false;
      await dropping;
      expect(dropped).toBeGreaterThan(0);
      const expected = [...ids('first', 150), ...ids('second', 150)].sort();
      // At least once: every entry arrives; one seen twice was redelivered (its position's commit lost).
      await eventually(() => expect([...new Set(received)].sort()).toEqual(expected), { timeoutMs: 20_000 });
      const repeats = received.length - new Set(received).size;
      expect(repeats).toBeLessThanOrEqual(redelivered.length);
      await bus.close();
    },
    60_000,
  );

  it.skipIf(!backend.available)(
    'an entry handled again because its position could not be committed comes as a redelivery',
    async () => {
      const { database, bus, deliveries } = await consumer();
      await sleep(300);
      // Every commit of a position fails until the test lets it through (a trigger of the table).
      const refuse = async (refused: boolean) =>
        sql`UPDATE commit_refused SET refused = ${backend.name === 'sqlite' ? Number(refused) : refused}`.execute(
          database.db,
        );
      if (backend.name === 'sqlite') {
        await sql`CREATE TABLE commit_refused (refused INTEGER NOT NULL)`.execute(database.db);
        await sql`INSERT INTO commit_refused VALUES (1)`.execute(database.db);
        await sql`CREATE TRIGGER refuse_commit BEFORE UPDATE ON consumer_offsets
          WHEN (SELECT refused FROM commit_refused) = 1 BEGIN SELECT RAISE(ABORT, 'commit refused'); END`.execute(
          database.db,
        );
      } else {
        await sql`CREATE TABLE commit_refused (refused boolean NOT NULL)`.execute(database.db);
        await sql`INSERT INTO commit_refused VALUES (true)`.execute(database.db);
        await sql`CREATE FUNCTION refuse_commit() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN IF (SELECT refused FROM commit_refused) THEN RAISE EXCEPTION 'commit refused'; END IF; RETURN NEW; END $$`.execute(
          database.db,
        );
        await sql`CREATE TRIGGER refuse_commit BEFORE UPDATE ON consumer_offsets
          FOR EACH ROW EXECUTE FUNCTION refuse_commit()`.execute(database.db);
      }
      const keys = ids('again', 5);
      for (const key of keys) await bus.publish(TOPIC, key, HEADERS, event(key).envelope);
      const times = (key: string) => deliveries.filter(([id]) => id === key).length;
      await eventually(() => expect(keys.map(times).every((n) => n >= 2)).toBe(true), { timeoutMs: 10_000 });
      await refuse(false);
      await sleep(1000); // committed now: nothing more comes
      const settled = deliveries.length;
      await sleep(500);
      expect(deliveries.length).toBe(settled);
      for (const key of keys) {
        const counts = deliveries.filter(([id]) => id === key).map(([, count]) => count);
        expect(counts[0], `${key}'s first delivery`).toBe(1);
        expect(
          counts.slice(1).every((count) => count > 1),
          `${key}'s deliveries after its first: ${counts.join(', ')}`,
        ).toBe(true);
      }
      await bus.close();
    },
  );

  it.skipIf(!backend.available)('still reads an entry this process committed without telling its memory', async () => {
    const { database, bus, received } = await consumer();
    await sleep(300);
    // The outbox's way in, with the after-commit step (memory, wake-up) never taken.
    await database.db.transaction().execute(async (trx) => {
      await bus.appendInTransaction(trx, [
        { topic: TOPIC, key: 'lost', headers: HEADERS, envelope: event('lost').envelope },
      ]);
    });
    // Read once the partition's end, read again within a poll interval, is past the consumer.
    await eventually(() => expect(received).toEqual(['lost']), { timeoutMs: 10_000 });
    await bus.close();
  });
});
