/**
 * NATS stopped during writes (issue #5): requests still succeed (the events wait in the outbox),
 * readiness names NATS as down, and once NATS returns on the same port and store the events
 * flow: the event store has each once, and a consumer group of the test receives each event (each
 * `event_id`) and no other. Delivery is at least once (design.md, Events): a message whose ack the
 * stopping server never took comes again once it is back (seen in 1 run of 10 here), so the group
 * is checked as an idempotent consumer sees it, by `event_id`; the deliveries again are counted
 * and printed. Uses a nats-server of its own (never the shared one).
 */
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { NatsEventBus } from '../../src/adapters/event-bus/nats-event-bus.js';
import { TOPICS } from '../../src/domain/events.js';
import type { Subscription } from '../../src/ports/event-bus.js';
import { useTestApp } from '../helpers/app.js';
import { postgres, sqlite } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { HTTP_TEST_ENV, postShorten } from '../helpers/http.js';
import { natsServerBinaryAvailable, useOwnNatsServer } from '../helpers/own-nats-server.js';
import { storedCreatedByCode } from '../helpers/event-store.js';
import { connectTestNatsBus } from '../helpers/nats.js';

const backend = postgres.available ? postgres : sqlite;

describe(`NATS outage during writes (${backend.name})`, () => {
  const ok = natsServerBinaryAvailable();
  const prefix = `out${randomBytes(4).toString('hex')}_`;
  const nats = useOwnNatsServer(ok);
  const { service } = useTestApp(
    backend,
    () => ({
      ...HTTP_TEST_ENV,
      NATS_URL: nats.url,
      NATS_PREFIX: prefix,
      EVENT_POLL_MS: '50',
      NATS_ACK_WAIT_MS: '2000',
    }),
    { when: ok },
  );
  let observer: NatsEventBus;
  let subscription: Subscription;
  /** Each code's `url.created` event ids as delivered, a delivery again included. */
  const received = new Map<string, string[]>();
  /** Each code's distinct event ids received, as a consumer idempotent by `event_id` keeps them. */
  const receivedIds = (code: string) => [...new Set(received.get(code) ?? [])];

  beforeAll(async () => {
    if (!ok) return;
    observer = await connectTestNatsBus(nats.url, prefix, 2000);
    subscription = await observer.subscribe({
      group: 'outage-observer',
      topic: TOPICS.url,
      startAt: 'earliest',
      handler: async (message) => {
        if (message.envelope.event_type !== 'url.created') return;
        const code = (message.envelope.payload as { code: string }).code;
        received.set(code, [...(received.get(code) ?? []), message.envelope.event_id]);
      },
    });
  });
  afterAll(async () => {
    if (!ok) return;
    await nats.start().catch(() => undefined);
    await subscription?.close();
    await observer?.destroy();
    await observer?.close();
  });

  const storedCodes = () => storedCreatedByCode(service.database.db);

  const create = async (code: string) => {
    const response = await postShorten(service.app, {
      code,
      url: `https://example.com/${code}`,
      created_at: '2024-01-01T00:00:00Z',
      click_count: 0,
    });
    return { code, status: response.statusCode, body: response.body };
  };

  // The timeout is past the test's own waits (30 s for the events once NATS is back, 2.5 s more, the
  // server's stop and start): at vitest's default 30 s a slow run timed out inside the wait for
  // the events and said nothing of which had not arrived (CI rehearsal 56; 8.4 s on a quiet machine).
  it.skipIf(!ok)(
    'requests succeed while NATS is down; the events flow once it returns',
    async () => {
      expect(service.events.bus.constructor.name).toBe('NatsEventBus');
      const before = await create('outg00000');
      expect(before.status, before.body).toBe(201);
      await eventually(async () => expect((await storedCodes()).get('outg00000')).toHaveLength(1));

      // A burst of writes; NATS is stopped in the middle of it.
      const codes = Array.from({ length: 40 }, (_, i) => `outb${String(i).padStart(5, '0')}`);
      const results: Awaited<ReturnType<typeof create>>[] = [];
      let stopping: Promise<void> | undefined;
      for (const [i, code] of codes.entries()) {
        if (i === 10) stopping = nats.stop();
        results.push(await create(code));
        if (i === 20) await stopping; // the second half is written with NATS surely gone
      }
      for (const r of results) expect(r.status, `${r.code}: ${r.body}`).toBe(201);

      // While it is away: readiness names NATS, and what was written after it went is not delivered.
      const ready = await service.app.inject({ url: '/health/ready' });
      expect(ready.statusCode, ready.body).toBe(503);
      expect(ready.json<{ detail: string }>().detail).toBe('nats is not available');
      const lateCodes = codes.slice(21);
      const storedDuring = await storedCodes();
      for (const code of lateCodes) expect(storedDuring.has(code), code).toBe(false);
      // Reads, updates and deletes keep working too.
      expect((await service.app.inject({ url: `/${codes[0]}` })).statusCode).toBe(302);
      expect((await service.app.inject({ method: 'DELETE', url: `/${codes[1]}` })).statusCode).toBe(204);

      await nats.start();
      await eventually(
        async () => {
          const stored = await storedCodes();
          for (const code of ['outg00000', ...codes]) {
            expect(stored.get(code), code).toHaveLength(1);
            expect(receivedIds(code), code).toHaveLength(1);
          }
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      expect((await service.app.inject({ url: '/health/ready' })).statusCode).toBe(200);
      // No other event arrives, even after a redelivery interval.
      await new Promise((resolve) => setTimeout(resolve, 2500));
      const stored = await storedCodes();
      for (const code of ['outg00000', ...codes]) {
        expect(receivedIds(code), code).toEqual(stored.get(code));
      }
      const again = [...received.values()].reduce((n, ids) => n + ids.length - new Set(ids).size, 0);
      console.info(`NATS outage: ${received.size} events received, ${again} of them delivered again`);
      const deleted = await eventually(async () => {
        const db = service.database.db as unknown as Kysely<EventTables>;
        const rows = await db
          .selectFrom('event_store')
          .select('payload')
          .where('event_type', '=', 'url.deleted')
          .execute();
        const mine = rows.filter((r) => (JSON.parse(r.payload) as { code: string }).code === codes[1]);
        expect(mine).toHaveLength(1);
        return mine;
      });
      expect(deleted).toHaveLength(1);
    },
    90_000,
  );
});
