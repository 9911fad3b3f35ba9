/**
 * The event store keeps up with a burst: it takes a partition's messages a batch at a time
 * (an unordered group) and writes each batch in one transaction, instead of one message per
 * batch-writer wait. Runs on both buses. No timing is asserted: only that a burst is stored
 * whole, once, in far fewer batches than events.
 */
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { createEventMetrics } from '../../src/adapters/telemetry/event-metrics.js';
import { KyselyEventStore } from '../../src/adapters/storage/kysely-event-store.js';
import { eventStoreConsumer } from '../../src/consumers/event-store.js';
import { createEvent } from '../../src/domain/events.js';
import type { EventBus } from '../../src/ports/event-bus.js';
import type { ConsumerRunner } from '../../src/adapters/event-bus/consumer-runner.js';
import { Registry } from 'prom-client';
import { sqlite } from '../helpers/backends.js';
import { startTestConsumer } from '../helpers/consumers.js';
import { useOpenDatabase } from '../helpers/storage.js';
import { BUS_KINDS } from '../helpers/event-buses.js';
import { eventually } from '../helpers/eventually.js';

const BURST = 2000;
const available = Object.fromEntries(await Promise.all(BUS_KINDS.map(async (k) => [k.name, await k.available()])));

describe.each(BUS_KINDS)('event store under a burst on $name', (kind) => {
  const ok = available[kind.name] as boolean;
  const { database } = useOpenDatabase(sqlite, { when: ok });
  let family: Awaited<ReturnType<(typeof kind)['family']>>;
  let bus: EventBus;
  let runner: ConsumerRunner;

  beforeAll(async () => {
    if (!ok) return;
    family = await kind.family();
    bus = await family.connect();
    runner = await startTestConsumer(
      bus,
      createEventMetrics(new Registry()),
      { attempts: 3, backoffMs: 20, maxBackoffMs: 40 },
      eventStoreConsumer(new KyselyEventStore(database.db), { batchSize: 100, maxWaitMs: 20 }),
    );
  });
  afterAll(async () => {
    await runner?.stop();
    await family?.destroy();
  });

  it.skipIf(!ok)(`stores a burst of ${BURST} events once each, a batch per transaction`, async () => {
    const topic = 'url_events';
    const tag = randomBytes(3).toString('hex');
    const messages = Array.from({ length: BURST }, (_, n) => {
      const e = createEvent('test.burst', { n, tag }, { service: 'urlshortener', topic, key: `k${n}` });
      return {
        topic,
        key: e.key,
        headers: { event_type: 'test.burst', service: 'urlshortener' },
        envelope: e.envelope,
      };
    });
    for (let start = 0; start < BURST; start += 200) await bus.publishAll(messages.slice(start, start + 200));

    const store = database.db as unknown as Kysely<EventTables>;
    const rows = await eventually(
      async () => {
        const stored = await store
          .selectFrom('event_store')
          .select(['event_id', 'stored_at'])
          .where('event_type', '=', 'test.burst')
          .execute();
        expect(stored).toHaveLength(BURST);
        return stored;
      },
      { timeoutMs: 30_000 },
    );
    expect(new Set(rows.map((r) => r.event_id))).toEqual(new Set(messages.map((m) => m.envelope.event_id)));
    // Each batch is written with one stored_at: far fewer batches than events.
    expect(new Set(rows.map((r) => r.stored_at)).size).toBeLessThan(BURST / 10);
  });
});
