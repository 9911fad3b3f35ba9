/**
 * The dead-letter manager's retries when the bus refuses the re-publication: one that fails for
 * now is given back to the table for one more delay (not lost, not retried in a tight loop), one
 * the bus can never take is parked for an admin. The letters live in the real `dead_letters`
 * table on both databases; the bus is a stand-in whose `publish` fails on demand (a real bus that
 * refuses one message and takes the next cannot be arranged from a test; the outage tests of the
 * buses themselves cover real failures). A graceful stop waits for a re-publication under way and
 * starts no other.
 */
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { KyselyDeadLetterStore } from '../../src/adapters/storage/kysely-dead-letter-store.js';
import { otelMessageTracing } from '../../src/adapters/telemetry/otel-message-tracing.js';
import { createEvent } from '../../src/domain/events.js';
import type { EventBus } from '../../src/ports/event-bus.js';
import { DeadLetterManager } from '../../src/services/dead-letter-manager.js';
import { BACKENDS } from '../helpers/backends.js';
import { gate } from '../helpers/gate.js';
import { useOpenDatabase } from '../helpers/storage.js';

const DELAY_MS = 60_000;

describe.each(BACKENDS)('dead-letter retries the bus refuses, on $name', (backend) => {
  const { database } = useOpenDatabase(backend);
  let store: KyselyDeadLetterStore;
  let clock = Date.parse('2024-05-06T07:08:09.123Z');
  /** What publish does next: succeed, fail for now, or fail for good. */
  let outcome: 'ok' | 'transient' | 'permanent' = 'ok';
  /** When set, a publication reaches the bus (`reached`) and waits there until `released`. */
  let held: { reached: () => void; released: Promise<void> } | undefined;
  const published: string[] = [];
  const bus = {
    system: 'test',
    publish: async (topic: string, _key: string, _headers: unknown, envelope: { event_id: string }) => {
      if (held) {
        held.reached();
        await held.released;
      }
      if (outcome === 'transient') throw new Error('bus unreachable');
      if (outcome === 'permanent') throw Object.assign(new Error('larger than the broker takes'), { permanent: true });
      published.push(`${topic}/${envelope.event_id}`);
      return { partition: 0, offset: published.length };
    },
  } as unknown as EventBus;
  let manager: DeadLetterManager;
  const newManager = (letters: KyselyDeadLetterStore = store) =>
    new DeadLetterManager(
      { store: letters, bus, metrics: { retried: () => undefined }, tracing: otelMessageTracing('test') },
      { maxRetries: 3, retryDelayMs: DELAY_MS, clock: () => clock },
      'urlshortener',
    );

  beforeAll(() => {
    if (!backend.available) return;
    store = new KyselyDeadLetterStore(database.db);
    manager = newManager();
  });

  /** The real store, but its `method` refuses its first two calls as a dropped connection would. */
  function refusingTwice(method: 'changeStatus' | 'setStatus') {
    let refusals = 0;
    const flaky = Object.create(store) as KyselyDeadLetterStore;
    const real = store[method].bind(store) as (...args: unknown[]) => Promise<unknown>;
    (flaky as unknown as Record<string, unknown>)[method] = async (...args: unknown[]) => {
      if (refusals < 2) {
        refusals++;
        throw new Error('Connection terminated unexpectedly');
      }
      return real(...args);
    };
    return { store: flaky, refused: () => refusals };
  }

  /** Long after any claim would have run out, the sweep sends nothing more: the event went out once. */
  async function expectPublishedOnce(eventId: string): Promise<void> {
    clock += 10 * DELAY_MS;
    await manager.retryDue();
    expect(published.filter((p) => p === `url_events/${eventId}`)).toHaveLength(1);
  }

  /** A `retrying` letter due now. */
  async function dueLetter(): Promise<{ id: number; eventId: string }> {
    const { envelope } = createEvent(
      'url.created',
      { code: 'abcdef' },
      { service: 'urlshortener', topic: 'url_events', key: 'abcdef' },
    );
    const id = await store.record(
      {
        dlq_event_id: randomUUID(),
        topic: 'url_events',
        partition: 1,
        group: 'notifier',
        headers: { event_type: 'url.created', service: 'urlshortener' },
        envelope,
        error: 'Error: boom',
        attempts: 5,
        status: 'retrying',
        retry_at: clock,
      },
      clock,
    );
    return { id, eventId: envelope.event_id };
  }

  it.skipIf(!backend.available)('a re-publication that fails for now is tried again one delay later', async () => {
    const { id, eventId } = await dueLetter();
    outcome = 'transient';
    await expect(manager.retryIfDue(id)).rejects.toThrow('bus unreachable');
    expect((await store.get(id))!.status).toBe('retrying');
    expect(await store.due(clock + DELAY_MS - 1, 1_000)).not.toContain(id);
    expect(published).not.toContain(`url_events/${eventId}`);

    outcome = 'ok';
    clock += DELAY_MS;
    expect(await manager.retryDue()).toBeGreaterThanOrEqual(1);
    expect((await store.get(id))!.status).toBe('retried');
    expect(published.filter((p) => p === `url_events/${eventId}`)).toHaveLength(1);
    expect(await manager.retryIfDue(id)).toBe(false);
  });

  it.skipIf(!backend.available)('one the bus can never take is parked for an admin', async () => {
    const { id, eventId } = await dueLetter();
    outcome = 'permanent';
    expect(await manager.retryIfDue(id)).toBe(false);
    expect((await store.get(id))!.status).toBe('parked');
    outcome = 'ok';
    clock += DELAY_MS;
    await manager.retryDue();
    expect(published).not.toContain(`url_events/${eventId}`);
  });

  it.skipIf(!backend.available)(
    'a graceful stop waits for the re-publication under way, and starts no other',
    async () => {
      const stopping = newManager();
      const [underWay, next] = [await dueLetter(), await dueLetter()];
      const [reached, released] = [gate(), gate()];
      held = { reached: reached.open, released: released.opened };
      try {
        const retry = stopping.retryIfDue(underWay.id);
        await reached.opened; // claimed, and at the bus
        let stopped = false;
        const stop = stopping.stop().then(() => (stopped = true));
        await new Promise((resolve) => setTimeout(resolve, 100));
        expect(stopped).toBe(false);
        released.open();
        await stop;
        expect(await retry).toBe(true);
      } finally {
        held = undefined;
      }
      // Published and marked before the process would go: no claim is left to wait out.
      expect((await store.get(underWay.id))!.status).toBe('retried');
      expect(published.filter((p) => p === `url_events/${underWay.eventId}`)).toHaveLength(1);
      // A stopped manager leaves the next due letter to another instance.
      expect(await stopping.retryIfDue(next.id)).toBe(false);
      expect(await stopping.retryDue()).toBe(0);
      const waiting = (await store.get(next.id))!;
      expect(waiting.status).toBe('retrying');
      expect(await store.due(clock, 1_000)).toContain(next.id);
      expect(await manager.retryIfDue(next.id)).toBe(true);
    },
  );

  it.skipIf(!backend.available)(
    'a status the database refuses for a moment after the publication is written again, not published twice',
    async () => {
      const { id, eventId } = await dueLetter();
      const flaky = refusingTwice('changeStatus');
      expect(await newManager(flaky.store).retryIfDue(id)).toBe(true);
      expect(flaky.refused()).toBe(2);
      expect((await store.get(id))!.status).toBe('retried');
      // Long after the claim would have run out: nothing goes out again.
      await expectPublishedOnce(eventId);
    },
  );

  it.skipIf(!backend.available)(
    "an admin's retry whose status the database refuses for a moment after the publication answers retried, published once",
    async () => {
      const { id, eventId } = await dueLetter();
      const flaky = refusingTwice('setStatus');
      // Refused, the admin would be answered 503 with the letter still `retrying`: its timer (or
      // the admin trying again) would publish it a second time.
      expect((await newManager(flaky.store).retry(id)).status).toBe('retried');
      expect(flaky.refused()).toBe(2);
      await expectPublishedOnce(eventId);
    },
  );
});
