/**
 * Event bus throughput (`npm run bench:bus`): events/s published and consumed through each
 * EventBus adapter, each beside a baseline in the same run that does the same durable work
 * without the adapter (a raw SQLite insert loop for the embedded log, raw JetStream publishes and
 * pulls for NATS), with the ratio printed. NATS is measured when 127.0.0.1:4222 answers.
 *
 * BUS_EVENTS (default 5000) events per measurement, BUS_PUBLISHERS (default 8) concurrent publishers.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { AckPolicy, connect, JSONCodec, StorageType } from 'nats';
import { EmbeddedLogEventBus } from '../src/adapters/event-bus/embedded-log/embedded-log-event-bus.js';
import { NatsEventBus } from '../src/adapters/event-bus/nats-event-bus.js';
import { openDatabase } from '../src/adapters/storage/database.js';
import { migrateToLatest } from '../src/adapters/storage/migrations.js';
import { createEvent } from '../src/domain/events.js';
import type { EventBus } from '../src/ports/event-bus.js';

const EVENTS = Number(process.env.BUS_EVENTS ?? 5000);
const PUBLISHERS = Number(process.env.BUS_PUBLISHERS ?? 8);
const NATS = '127.0.0.1:4222';
const HEADERS = { event_type: 'bench.event', service: 'bench', traceparent: '', tracestate: '' };

const perSecond = (count: number, ms: number) => Math.round((count / ms) * 1000);

function events(topic: string) {
  return Array.from({ length: EVENTS }, (_, n) =>
    createEvent('bench.event', { n, pad: 'x'.repeat(200) }, { service: 'bench', topic, key: `key${n % 64}` }),
  );
}

/** Runs `work` over `items` with `PUBLISHERS` concurrent workers; returns the elapsed ms. */
async function concurrently<T>(items: readonly T[], work: (item: T) => Promise<unknown>): Promise<number> {
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: PUBLISHERS }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
  return performance.now() - started;
}

async function measureAdapter(bus: EventBus, topic: string) {
  const batch = events(topic);
  const publishMs = await concurrently(batch, (e) => bus.publish(topic, e.key, HEADERS, e.envelope));
  let consumed = 0;
  let done: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const started = performance.now();
  const subscription = await bus.subscribe({
    group: `bench-${randomBytes(3).toString('hex')}`,
    topic,
    handler: async () => {
      if (++consumed === EVENTS) done();
    },
  });
  await finished;
  const consumeMs = performance.now() - started;
  await subscription.close();
  return { published: perSecond(EVENTS, publishMs), consumed: perSecond(EVENTS, consumeMs) };
}

async function embedded() {
  const dir = mkdtempSync(join(tmpdir(), 'bus-bench-'));
  try {
    const database = openDatabase({ kind: 'sqlite', url: join(dir, 'bus.db'), poolMax: 1 });
    await migrateToLatest(database.db, database.dialect);
    const bus = new EmbeddedLogEventBus(database.db, {
      partitions: 4,
      leaseMs: 10_000,
      pollMs: 250,
      retryDelayMs: 200,
      batchSize: 100,
    });
    const adapter = await measureAdapter(bus, 'bench');
    await bus.close();
    await database.close();

    // Baseline: the same rows written and read straight through better-sqlite3, one transaction each.
    const raw = new SQLite(join(dir, 'raw.db'));
    raw.pragma('journal_mode = WAL');
    raw.pragma('synchronous = NORMAL');
    raw.exec('CREATE TABLE log (id INTEGER PRIMARY KEY, message_id TEXT UNIQUE, headers TEXT, envelope TEXT)');
    const insert = raw.prepare('INSERT INTO log (message_id, headers, envelope) VALUES (?, ?, ?)');
    const batch = events('raw');
    let started = performance.now();
    for (const e of batch) insert.run(e.envelope.event_id, JSON.stringify(HEADERS), JSON.stringify(e.envelope));
    const publishMs = performance.now() - started;
    started = performance.now();
    const select = raw.prepare('SELECT * FROM log WHERE id > ? ORDER BY id LIMIT 100');
    for (let last = 0, rows = select.all(0) as { id: number; envelope: string }[]; rows.length > 0;) {
      for (const row of rows) JSON.parse(row.envelope);
      last = rows[rows.length - 1]!.id;
      rows = select.all(last) as { id: number; envelope: string }[];
    }
    const consumeMs = performance.now() - started;
    raw.close();
    return { adapter, baseline: { published: perSecond(EVENTS, publishMs), consumed: perSecond(EVENTS, consumeMs) } };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function nats() {
  const prefix = `bench${randomBytes(3).toString('hex')}_`;
  const bus = await NatsEventBus.connect({
    url: `nats://${NATS}`,
    partitions: 4,
    ackWaitMs: 30_000,
    retryDelayMs: 200,
    prefix,
    retentionMs: 3_600_000,
    duplicateWindowMs: 120_000,
  });
  try {
    const adapter = await measureAdapter(bus, 'bench');

    // Baseline: raw JetStream publishes (with message ids) and a pull consumer acking each message.
    const nc = await connect({ servers: NATS });
    const jsm = await nc.jetstreamManager();
    const js = nc.jetstream();
    const stream = `${prefix}raw`;
    await jsm.streams.add({ name: stream, subjects: [`${stream}.*`], storage: StorageType.File });
    const codec = JSONCodec();
    const batch = events('raw');
    const publishMs = await concurrently(batch, (e) =>
      js.publish(`${stream}.0`, codec.encode(e.envelope), { msgID: e.envelope.event_id }),
    );
    await jsm.consumers.add(stream, { durable_name: 'raw', ack_policy: AckPolicy.Explicit });
    const consumer = await js.consumers.get(stream, 'raw');
    const started = performance.now();
    let consumed = 0;
    while (consumed < EVENTS) {
      const messages = await consumer.fetch({ max_messages: 100, expires: 1000 });
      for await (const message of messages) {
        codec.decode(message.data);
        message.ack();
        consumed++;
      }
    }
    const consumeMs = performance.now() - started;
    await jsm.streams.delete(stream);
    await nc.close();
    return { adapter, baseline: { published: perSecond(EVENTS, publishMs), consumed: perSecond(EVENTS, consumeMs) } };
  } finally {
    await bus.destroy();
    await bus.close();
  }
}

function reachable(hostPort: string): Promise<boolean> {
  const [host, port] = hostPort.split(':');
  return new Promise((resolve) => {
    const socket = net.connect({ host, port: Number(port) });
    socket.setTimeout(1000, () => (socket.destroy(), resolve(false)));
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

const rows: string[][] = [];
const add = (name: string, result: Awaited<ReturnType<typeof embedded>>) => {
  const { adapter, baseline } = result;
  rows.push([
    name,
    String(adapter.published),
    String(baseline.published),
    (adapter.published / baseline.published).toFixed(2),
    String(adapter.consumed),
    String(baseline.consumed),
    (adapter.consumed / baseline.consumed).toFixed(2),
  ]);
};

console.log(`bus throughput: ${EVENTS} events of ~300 bytes, ${PUBLISHERS} concurrent publishers, one consumer group`);
add('embedded log (SQLite)', await embedded());
if (await reachable(NATS)) add('NATS JetStream', await nats());
else console.log(`NATS not reachable at ${NATS}: skipped`);
const header = ['adapter', 'published/s', 'baseline/s', 'ratio', 'consumed/s', 'baseline/s', 'ratio'];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
for (const row of [header, ...rows]) console.log(row.map((cell, i) => cell.padStart(widths[i]!)).join('  '));
