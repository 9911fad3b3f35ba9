import { beforeAll, describe, expect, it } from 'vitest';
import { KyselyEventStore } from '../../src/adapters/storage/kysely-event-store.js';
import { createEvent } from '../../src/domain/events.js';
import type { EventStore, StorableMessage } from '../../src/ports/event-store.js';
import { BACKENDS } from '../helpers/backends.js';
import { useOpenDatabase } from '../helpers/storage.js';

let offset = 0;
const message = (payload: unknown, type = 'test.stored'): StorableMessage => {
  const { envelope } = createEvent(type, payload, { service: 'urlshortener', topic: 'url_events', key: 'k' });
  return {
    topic: 'url_events',
    partition: 3,
    offset: ++offset,
    headers: { event_type: type, service: 'urlshortener', traceparent: '', tracestate: '' },
    envelope,
  };
};

/** One contract, every storage adapter: the permanent record of events. */
describe.each(BACKENDS)('EventStore on $name', (backend) => {
  const { database } = useOpenDatabase(backend);
  let store: EventStore;

  beforeAll(() => {
    if (backend.available) store = new KyselyEventStore(database.db);
  });

  it.skipIf(!backend.available)('keeps each event as it was received, with where the bus had it', async () => {
    const stored = message({ execution_id: 'exec-1', nested: { list: [1, 'two', null] } }, 'execution.completed');
    await store.append([stored], 1_700_000_000_123);
    expect(await store.get(stored.envelope.event_id)).toEqual({
      event_id: stored.envelope.event_id,
      event_type: 'execution.completed',
      event_version: 1,
      topic: 'url_events',
      partition: 3,
      offset: stored.offset,
      execution_id: 'exec-1',
      service: 'urlshortener',
      occurred_at: stored.envelope.occurred_at,
      payload: { execution_id: 'exec-1', nested: { list: [1, 'two', null] } },
      headers: stored.headers,
      stored_at: 1_700_000_000_123,
    });
  });

  it.skipIf(!backend.available)('names no execution for an event whose payload names none', async () => {
    const stored = message({ code: 'abc' });
    await store.append([stored], Date.now());
    expect((await store.get(stored.envelope.event_id))?.execution_id).toBeNull();
    expect(await store.get('no-such-event')).toBeUndefined();
  });

  it.skipIf(!backend.available)('stores a batch of any size whole', async () => {
    const batch = Array.from({ length: 123 }, (_, n) => message({ n }));
    await store.append(batch, Date.now());
    for (const stored of batch)
      expect((await store.get(stored.envelope.event_id))?.payload).toEqual(stored.envelope.payload);
  });

  it.skipIf(!backend.available)('stores an event id once: the first copy stays', async () => {
    const first = message({ copy: 1 });
    await store.append([first], 1000);
    const again = { ...first, offset: first.offset + 100, envelope: { ...first.envelope, payload: { copy: 2 } } };
    await store.append([again, message({ other: true })], 2000);
    expect(await store.get(first.envelope.event_id)).toMatchObject({ payload: { copy: 1 }, stored_at: 1000 });
  });

  it.skipIf(!backend.available)('prunes what was stored before the cut-off, and only that', async () => {
    const old = message({ age: 'old' });
    const recent = message({ age: 'recent' });
    await store.append([old], 5_000);
    await store.append([recent], 5_001);
    await store.prune(5_001);
    expect(await store.get(old.envelope.event_id)).toBeUndefined();
    expect(await store.get(recent.envelope.event_id)).toBeDefined();
  });
});
