import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { KyselyDeadLetterStore } from '../../src/adapters/storage/kysely-dead-letter-store.js';
import { createEvent } from '../../src/domain/events.js';
import type { DeadLetterStore, NewDeadLetter } from '../../src/ports/dead-letter-store.js';
import { BACKENDS } from '../helpers/backends.js';
import { useOpenDatabase } from '../helpers/storage.js';

const AT = Date.parse('2024-05-06T07:08:09.123Z');

const newLetter = (overrides: Partial<NewDeadLetter> = {}): NewDeadLetter => {
  const { envelope } = createEvent(
    'url.created',
    { code: 'abc', n: [1, 2] },
    {
      service: 'urlshortener',
      topic: 'url_events',
      key: 'abc',
    },
  );
  return {
    dlq_event_id: randomUUID(),
    topic: 'url_events',
    partition: 5,
    group: 'event-store',
    headers: { event_type: 'url.created', service: 'urlshortener', traceparent: '', tracestate: '' },
    envelope,
    error: 'Error: boom',
    attempts: 3,
    status: 'parked',
    ...overrides,
  };
};

/** One contract, every storage adapter: what consumers gave up on. */
describe.each(BACKENDS)('DeadLetterStore on $name', (backend) => {
  const { database } = useOpenDatabase(backend);
  let store: DeadLetterStore;

  beforeAll(() => {
    if (backend.available) store = new KyselyDeadLetterStore(database.db);
  });

  it.skipIf(!backend.available)('records a letter and reads it back as the admin API shows it', async () => {
    const letter = newLetter();
    const id = await store.record(letter, AT);
    expect(await store.get(id)).toEqual({
      id,
      event_id: letter.envelope.event_id,
      event_type: 'url.created',
      topic: 'url_events',
      partition: 5,
      group: 'event-store',
      status: 'parked',
      attempts: 3,
      error: 'Error: boom',
      headers: letter.headers,
      envelope: letter.envelope,
      created_at: '2024-05-06T07:08:09.123Z',
      updated_at: '2024-05-06T07:08:09.123Z',
      retry_at: null,
    });
    expect(await store.get(id + 1000)).toBeUndefined();
  });

  it.skipIf(!backend.available)('finds a letter by the dead-letter message that recorded it', async () => {
    const letter = newLetter({ status: 'retrying' });
    const id = await store.record(letter, AT);
    expect(await store.findByMessage(letter.dlq_event_id)).toEqual({ id, status: 'retrying' });
    expect(await store.findByMessage(randomUUID())).toBeUndefined();
    await expect(store.record(letter, AT)).rejects.toThrow();
  });

  it.skipIf(!backend.available)('counts the letters other messages recorded for one event in one group', async () => {
    const first = newLetter();
    const again = { ...newLetter(), envelope: first.envelope };
    const otherGroup = { ...newLetter(), envelope: first.envelope, group: 'notifier' };
    for (const letter of [first, again, otherGroup]) await store.record(letter, AT);
    const eventId = first.envelope.event_id;
    expect(await store.countOthers(eventId, 'event-store', first.dlq_event_id)).toBe(1);
    expect(await store.countOthers(eventId, 'event-store', randomUUID())).toBe(2);
    expect(await store.countOthers(eventId, 'notifier', first.dlq_event_id)).toBe(1);
    expect(await store.countOthers(randomUUID(), 'event-store', first.dlq_event_id)).toBe(0);
  });

  it.skipIf(!backend.available)('changes a status, stamping the change time only', async () => {
    const id = await store.record(newLetter(), AT);
    await store.setStatus(id, 'discarded', AT + 60_000);
    expect(await store.get(id)).toMatchObject({
      status: 'discarded',
      created_at: '2024-05-06T07:08:09.123Z',
      updated_at: '2024-05-06T07:09:09.123Z',
    });
  });

  it.skipIf(!backend.available)('lists oldest first, by status, a page after an id', async () => {
    const ids: number[] = [];
    for (const status of ['retried', 'parked', 'retried', 'retried'] as const) {
      ids.push(await store.record(newLetter({ status }), AT));
    }
    const retried = (await store.list({ status: 'retried', limit: 500 })).map((l) => l.id);
    expect(retried).toEqual([...retried].sort((a, b) => a - b));
    expect(retried).toEqual(expect.arrayContaining([ids[0], ids[2], ids[3]]));
    expect(retried).not.toContain(ids[1]);
    expect((await store.list({ status: 'retried', limit: 2, after: ids[0] })).map((l) => l.id)).toEqual([
      ids[2],
      ids[3],
    ]);
    const all = await store.list({ limit: 3 });
    expect(all).toHaveLength(3);
    expect(all.map((l) => l.id)).toEqual([...all.map((l) => l.id)].sort((a, b) => a - b));
  });

  it.skipIf(!backend.available)('changes a status only from the one expected', async () => {
    const id = await store.record(newLetter({ status: 'retrying', retry_at: AT }), AT);
    expect(await store.changeStatus(id, 'parked', 'retried', AT + 1)).toBe(false);
    expect((await store.get(id))!.status).toBe('retrying');
    expect(await store.changeStatus(id, 'retrying', 'retried', AT + 1_000)).toBe(true);
    expect(await store.get(id)).toMatchObject({ status: 'retried', updated_at: '2024-05-06T07:08:10.123Z' });
    expect(await store.changeStatus(id, 'retrying', 'retried', AT + 2_000)).toBe(false);
    expect(await store.changeStatus(id + 1000, 'retrying', 'retried', AT)).toBe(false);
  });

  it.skipIf(!backend.available)(
    'lists the retrying letters due, takes one for its retry once, and gives it back later',
    async () => {
      const context = {
        event_type: 'url.created',
        service: 'urlshortener',
        traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`,
      };
      const soon = await store.record(
        newLetter({ status: 'retrying', retry_at: AT + 1_000, retry_context: context }),
        AT,
      );
      const later = await store.record(newLetter({ status: 'retrying', retry_at: AT + 5_000 }), AT);
      const parked = await store.record(newLetter({ status: 'parked', retry_at: AT }), AT);
      // Recorded before retry times were kept (or by an older version): due at once.
      const untimed = await store.record(newLetter({ status: 'retrying' }), AT);
      const mine = (ids: number[]) => ids.filter((id) => [soon, later, parked, untimed].includes(id));

      expect(mine(await store.due(AT + 500, 1_000))).toEqual([untimed]);
      expect(mine(await store.due(AT + 1_000, 1_000)).sort((a, b) => a - b)).toEqual(
        [soon, untimed].sort((a, b) => a - b),
      );
      expect(await store.claimRetry(later, AT + 1_000, AT + 31_000)).toBeUndefined(); // not due yet
      expect(await store.claimRetry(parked, AT + 1_000, AT + 31_000)).toBeUndefined(); // not retrying

      // As the admin API shows it: when it goes out; the claim then moves it on to the claim's end.
      expect(await store.get(soon)).toMatchObject({ retry_at: '2024-05-06T07:08:10.123Z' });
      const claimed = await store.claimRetry(soon, AT + 1_000, AT + 31_000);
      expect(await store.get(soon)).toMatchObject({ retry_at: '2024-05-06T07:08:40.123Z' });
      expect(claimed?.letter).toMatchObject({ id: soon, status: 'retrying', event_type: 'url.created' });
      expect(claimed?.context).toEqual(context);
      // Taken: no longer due, and a second claim (another instance) gets nothing, until the claim runs out.
      expect(await store.claimRetry(soon, AT + 1_000, AT + 31_000)).toBeUndefined();
      expect(mine(await store.due(AT + 30_000, 1_000))).toEqual(expect.not.arrayContaining([soon]));
      expect(mine(await store.due(AT + 31_000, 1_000))).toContain(soon);

      // Given back for later (its publication failed): due again then, and only while retrying.
      await store.reschedule(soon, AT + 40_000);
      expect(mine(await store.due(AT + 39_999, 1_000))).not.toContain(soon);
      expect(mine(await store.due(AT + 40_000, 1_000))).toContain(soon);
      await store.setStatus(soon, 'discarded', AT + 40_001);
      expect(mine(await store.due(AT + 50_000, 1_000))).not.toContain(soon);
      expect(await store.claimRetry(soon, AT + 50_000, AT + 80_000)).toBeUndefined();

      const untimedClaim = await store.claimRetry(untimed, AT, AT + 30_000);
      expect(untimedClaim?.context).toBeUndefined();
      expect(mine(await store.due(AT + 10, 2))).toHaveLength(0);
    },
  );
});
