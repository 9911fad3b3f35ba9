/**
 * A broker that is down when the service starts: the service starts anyway, answers writes
 * (the events wait in the outbox), reports NATS as not ready, and once NATS comes up the
 * consumers start and the events arrive. A group that follows only what comes next (each
 * instance's redirect-cache invalidation) and subscribed before the broker answered is handed
 * everything published after it subscribed: its consumer, made later, starts from that moment,
 * not from when it was made (which missed every change another instance made meanwhile, and left
 * this instance's cache serving a changed link for CACHE_TTL_MS).
 */
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import { NatsEventBus } from '../../src/adapters/event-bus/nats-event-bus.js';
import type { DatabaseSchema, EventTables } from '../../src/adapters/storage/schema.js';
import { createEvent, EVENT_TYPES, TOPICS } from '../../src/domain/events.js';
import type { BusMessage } from '../../src/ports/event-bus.js';
import { useTestApp } from '../helpers/app.js';
import { sqlite } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { expectRedirect, HTTP_TEST_ENV, postShorten } from '../helpers/http.js';
import { connectTestNatsBus } from '../helpers/nats.js';
import { natsServerBinaryAvailable, useOwnNatsServer } from '../helpers/own-nats-server.js';
import { storedCreatedByCode } from '../helpers/event-store.js';

/** A `url.updated` of `code`, as another instance of the service publishes it. */
async function publishUpdated(bus: NatsEventBus, code: string, url: string): Promise<string> {
  const updated = createEvent(
    EVENT_TYPES.urlUpdated,
    { code, url },
    { service: 'another-instance', topic: TOPICS.url, key: code },
  );
  const headers = { event_type: updated.envelope.event_type, service: 'another-instance' };
  await bus.publish(TOPICS.url, code, headers, updated.envelope);
  return updated.envelope.event_id;
}

describe('NATS down when the service starts', () => {
  const ok = natsServerBinaryAvailable();
  const prefix = `down${randomBytes(4).toString('hex')}_`;
  const nats = useOwnNatsServer(ok, { start: false }); // a port, but no server on it yet
  const { service } = useTestApp(
    sqlite,
    () => ({ ...HTTP_TEST_ENV, NATS_URL: nats.url, NATS_PREFIX: prefix, EVENT_POLL_MS: '50' }),
    { when: ok },
  );

  it.skipIf(!ok)('starts, takes writes, and delivers their events once NATS is up', async () => {
    const created = await postShorten(service.app, {
      code: 'natsdown1',
      url: 'https://example.com/down',
      created_at: '2024-01-01T00:00:00Z',
      click_count: 0,
    });
    expect(created.statusCode).toBe(201);
    const resolved = await service.app.inject({ method: 'GET', url: '/natsdown1' });
    expect(resolved.statusCode).toBe(302);
    const ready = await service.app.inject({ method: 'GET', url: '/health/ready' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json()).toMatchObject({ detail: 'nats is not available' });

    const db = service.database.db as unknown as Kysely<EventTables>;
    const outbox = await db.selectFrom('event_outbox').select('event_id').execute();
    expect(outbox.length).toBeGreaterThan(0);

    await nats.start();
    await eventually(
      async () => expect([...(await storedCreatedByCode(service.database.db)).keys()]).toEqual(['natsdown1']),
      { timeoutMs: 20_000 },
    );
    const readyAgain = await service.app.inject({ method: 'GET', url: '/health/ready' });
    expect(readyAgain.statusCode).toBe(200);
  });
});

describe('a group following only what comes next, subscribed before NATS answers', () => {
  const ok = natsServerBinaryAvailable();
  const prefix = `next${randomBytes(4).toString('hex')}_`;
  const nats = useOwnNatsServer(ok, { start: false });
  const { service } = useTestApp(
    sqlite,
    () => ({ ...HTTP_TEST_ENV, NATS_URL: nats.url, NATS_PREFIX: prefix, EVENT_POLL_MS: '50' }),
    { when: ok },
  );

  it.skipIf(!ok)(
    'an instance started while NATS was down drops a redirect another changed as NATS came up',
    async () => {
      const db = service.database.db as unknown as Kysely<Pick<DatabaseSchema, 'url_mappings'>>;
      // Made by another instance: this one caches it at its first redirect.
      await db
        .insertInto('url_mappings')
        .values({
          code: 'natsnext1',
          url: 'https://example.com/before',
          created_at: '2024-01-01T00:00:00Z',
          click_count: 0,
        })
        .execute();
      expectRedirect(await service.app.inject({ url: '/natsnext1' }), 'https://example.com/before');
      // The other instance changes it while NATS is away; its url.updated goes out as NATS comes up.
      await db
        .updateTable('url_mappings')
        .set({ url: 'https://example.com/after' })
        .where('code', '=', 'natsnext1')
        .execute();
      await nats.start();
      const other = await connectTestNatsBus(nats.url, prefix);
      try {
        await publishUpdated(other, 'natsnext1', 'https://example.com/after');
        // At once, not when the cached entry expires (CACHE_TTL_MS, 60 s).
        await eventually(
          async () => expectRedirect(await service.app.inject({ url: '/natsnext1' }), 'https://example.com/after'),
          { timeoutMs: 10_000 },
        );
      } finally {
        await other.close();
      }
    },
  );

  it.skipIf(!ok)('a bus still connecting hands its new group what is published once subscribe returns', async () => {
    const other = await connectTestNatsBus(nats.url, prefix);
    const missed: string[] = [];
    try {
      for (let round = 0; round < 5; round++) {
        const connecting = NatsEventBus.open({
          url: nats.url,
          partitions: 4,
          ackWaitMs: 1000,
          retryDelayMs: 50,
          prefix,
          retentionMs: 3_600_000,
          duplicateWindowMs: 120_000,
        });
        const handed: BusMessage[] = [];
        const subscription = await connecting.subscribe({
          group: `next-${round}`,
          topic: TOPICS.url,
          startAt: 'latest',
          handler: async (message) => void handed.push(message),
        });
        const sent = await publishUpdated(other, `natsnext${round}`, 'https://example.com/next');
        await eventually(() => expect(handed.map((m) => m.envelope.event_id)).toContain(sent), {
          timeoutMs: 5_000,
        }).catch(() => missed.push(sent));
        await subscription.close();
        await connecting.close();
      }
    } finally {
      await other.close();
    }
    expect(missed).toEqual([]);
  });
});
