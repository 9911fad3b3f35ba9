/**
 * The dead-letter flow (issue #5): a handler that fails N times sends the message to
 * `dead_letter_queue` with its original headers and the error; the dead-letter manager records
 * it, re-publishes it up to DLQ_MAX_RETRIES times, then parks it. Admins list, inspect, retry
 * and discard under `/api/v1/admin/dlq` (401 / 403 / CSRF as everywhere under /api/). The
 * counters of GET /metrics follow. On the embedded bus (both databases) and on NATS JetStream.
 */
import type { Kysely } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { TOPICS } from '../../src/domain/events.js';
import type { DeadLetter } from '../../src/domain/dead-letter.js';
import { useTestApp } from '../helpers/app.js';
import { metricValue } from '../helpers/auth.js';
import { useRefusingConsumer } from '../helpers/refusing-consumer.js';
import { busVariants } from '../helpers/event-buses.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, createMapping, expectError, newMapping } from '../helpers/http.js';
import { natsAvailable } from '../helpers/services.js';
import { uniqueNatsPrefix } from '../helpers/nats.js';

const ADMIN = { username: 'dlq_admin', email: 'dlq_admin@example.com', password: 'admin password 1' };
const ATTEMPTS = 2;
const MAX_RETRIES = 2;
const ENV = {
  EVENT_HANDLER_ATTEMPTS: String(ATTEMPTS),
  EVENT_RETRY_BACKOFF_MS: '20',
  EVENT_RETRY_MAX_BACKOFF_MS: '40',
  DLQ_MAX_RETRIES: String(MAX_RETRIES),
  DLQ_RETRY_DELAY_MS: '20',
  EVENT_POLL_MS: '50',
  EVENT_LEASE_MS: '2000',
};
const GROUP = 'flaky-test-group';

const VARIANTS = busVariants(await natsAvailable(), 'NATS JetStream');

describe.each(VARIANTS)('dead letters on $name', (variant) => {
  const ok = variant.available;
  const t = useTestApp(variant.backend, ENV, {
    accounts: true,
    admin: ADMIN,
    natsPrefix: variant.nats ? uniqueNatsPrefix('dlq') : undefined,
    when: ok,
  });
  const admin = t.admin;
  const user = t.user('dlquser');
  let db: Kysely<EventTables>;
  const nextCode = codeMaker(variant.nats ? 'dlqn' : variant.backend.name === 'sqlite' ? 'dlqs' : 'dlqp');
  /** Codes whose url.created the flaky consumer refuses; every delivery it sees, by event id. */
  const { failing, deliveries } = useRefusingConsumer(t, GROUP, { attempts: ATTEMPTS, startAt: 'latest' });

  beforeAll(() => {
    if (t.running) db = t.service.database.db as unknown as Kysely<EventTables>;
  });

  const lettersOf = (eventId: string) =>
    db.selectFrom('dead_letters').selectAll().where('event_id', '=', eventId).orderBy('id').execute();
  const storedCreated = async (code: string) => {
    const rows = await db.selectFrom('event_store').selectAll().where('event_type', '=', 'url.created').execute();
    const row = rows.find((r) => (JSON.parse(r.payload) as { code: string }).code === code);
    if (!row) throw new Error(`url.created of ${code} not stored yet`);
    return row;
  };
  const dlq = (method: 'GET' | 'POST', path: string, headers: Record<string, string> = admin.headers) =>
    t.app.inject({ method, url: `/api/v1/admin/dlq${path}`, headers });
  const metric = (name: string, labels: Record<string, string>) => metricValue(t.app, name, labels);

  /** Makes a mapping whose url.created the flaky group refuses until parked; its event id. */
  async function parkedEvent(): Promise<{
    code: string;
    eventId: string;
    letters: Awaited<ReturnType<typeof lettersOf>>;
  }> {
    const body = newMapping(nextCode);
    failing.add(body.code);
    await createMapping(t.app, body);
    const original = await eventually(() => storedCreated(body.code));
    const letters = await eventually(async () => {
      const rows = await lettersOf(original.event_id);
      expect(rows.map((r) => r.status)).toEqual([...Array(MAX_RETRIES).fill('retried'), 'parked']);
      return rows;
    });
    return { code: body.code, eventId: original.event_id, letters };
  }

  it.skipIf(!ok)(
    `a handler failing ${ATTEMPTS} times dead-letters the message; retried ${MAX_RETRIES} times, then parked`,
    async () => {
      const labels = { topic: 'url_events', group: GROUP };
      const before = {
        failed: await metric('events_failed_total', labels),
        dead: await metric('events_dead_lettered_total', labels),
        retried: await metric('events_retried_total', { topic: 'url_events' }),
      };
      expect(t.service.events.bus.constructor.name).toBe(variant.nats ? 'NatsEventBus' : 'EmbeddedLogEventBus');
      const { code, eventId, letters } = await parkedEvent();
      const original = await storedCreated(code);

      // The first dead letter carries the original message's headers and the handler's error.
      const first = letters[0]!;
      expect(JSON.parse(first.headers)).toEqual(JSON.parse(original.headers));
      // Tracing is off here and no context came in: no trace headers rather than empty ones.
      expect(Object.keys(JSON.parse(first.headers)).sort()).toEqual(['event_type', 'service']);
      expect(JSON.parse(first.headers)).toMatchObject({ event_type: 'url.created', service: 'urlshortener' });
      expect(first.error).toBe(`Error: refusing ${code}`);
      expect(first.attempts).toBe(ATTEMPTS);
      expect(first.group_name).toBe(GROUP);
      expect(first.topic).toBe('url_events');
      expect(first.event_type).toBe('url.created');
      expect(first.partition_no).toBe(original.partition_no);
      for (const letter of letters) {
        expect(JSON.parse(letter.envelope)).toEqual({
          event_id: eventId,
          event_type: 'url.created',
          event_version: 1,
          occurred_at: original.occurred_at,
          service: 'urlshortener',
          payload: JSON.parse(original.payload),
        });
      }
      // The dead_letter_queue messages themselves are on the bus (and in the event store).
      const queued = await eventually(async () => {
        const rows = await db
          .selectFrom('event_store')
          .selectAll()
          .where('topic', '=', TOPICS.deadLetter)
          .where(
            'event_id',
            'in',
            letters.map((l) => l.dlq_event_id),
          )
          .execute();
        expect(rows).toHaveLength(MAX_RETRIES + 1);
        return rows;
      });
      for (const row of queued) {
        expect(row.event_type).toBe('dead_letter');
        expect(JSON.parse(row.payload)).toMatchObject({
          topic: 'url_events',
          group: GROUP,
          attempts: ATTEMPTS,
          error: { name: 'Error', message: `refusing ${code}` },
          original: { event_id: eventId },
        });
      }

      // Every (re-)delivery of the event was tried ATTEMPTS times; nothing more came after parking.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const mine = deliveries.filter((m) => m.envelope.event_id === eventId);
      expect(mine).toHaveLength(ATTEMPTS * (MAX_RETRIES + 1));
      expect(await lettersOf(eventId)).toHaveLength(MAX_RETRIES + 1);
      // The event store kept one row for the event despite the re-publications.
      const copies = await db.selectFrom('event_store').select('event_id').where('event_id', '=', eventId).execute();
      expect(copies).toHaveLength(1);

      await eventually(async () => {
        expect(await metric('events_failed_total', labels)).toBe(before.failed + ATTEMPTS * (MAX_RETRIES + 1));
        expect(await metric('events_dead_lettered_total', labels)).toBe(before.dead + MAX_RETRIES + 1);
        expect(await metric('events_retried_total', { topic: 'url_events' })).toBe(before.retried + MAX_RETRIES);
      });
    },
  );

  it.skipIf(!ok)('admins list and inspect dead letters', async () => {
    const { eventId, letters } = await parkedEvent();
    const parkedId = Number(letters.at(-1)!.id);

    const all = await dlq('GET', '');
    expect(all.statusCode, all.body).toBe(200);
    const listed = all.json<DeadLetter[]>();
    expect(listed.filter((l) => l.event_id === eventId).map((l) => l.id)).toEqual(letters.map((l) => Number(l.id)));

    const parked = await dlq('GET', '?status=parked');
    expect(parked.statusCode).toBe(200);
    const parkedList = parked.json<DeadLetter[]>();
    expect(parkedList.every((l) => l.status === 'parked')).toBe(true);
    expect(parkedList.map((l) => l.id)).toContain(parkedId);

    const paged = await dlq('GET', `?limit=1&after=${parkedId - 1}`);
    expect(paged.json<DeadLetter[]>().map((l) => l.id)).toEqual([parkedId]);

    const one = await dlq('GET', `/${parkedId}`);
    expect(one.statusCode, one.body).toBe(200);
    expect(one.json<DeadLetter>()).toMatchObject({
      id: parkedId,
      event_id: eventId,
      event_type: 'url.created',
      topic: 'url_events',
      group: GROUP,
      status: 'parked',
      attempts: ATTEMPTS,
      error: expect.stringContaining('refusing'),
      headers: { event_type: 'url.created', service: 'urlshortener' },
      envelope: { event_id: eventId, event_type: 'url.created' },
    });
    expectError(await dlq('GET', '/99999999'), 404);
    expectError(await dlq('GET', '?status=lost'), 422);
  });

  it.skipIf(!ok)('retry re-publishes a parked message to its topic; discard marks it', async () => {
    const first = await parkedEvent();
    const second = await parkedEvent();
    const retriedBefore = await metric('events_retried_total', { topic: 'url_events' });
    failing.delete(first.code); // the consumer is fixed
    const seenBefore = deliveries.filter((m) => m.envelope.event_id === first.eventId).length;

    const retried = await dlq('POST', `/${Number(first.letters.at(-1)!.id)}/retry`);
    expect(retried.statusCode, retried.body).toBe(200);
    expect(retried.json<DeadLetter>()).toMatchObject({ event_id: first.eventId, status: 'retried' });
    await eventually(() =>
      expect(deliveries.filter((m) => m.envelope.event_id === first.eventId)).toHaveLength(seenBefore + 1),
    );
    const redelivered = deliveries.filter((m) => m.envelope.event_id === first.eventId).at(-1)!;
    expect(redelivered.topic).toBe('url_events');
    expect(redelivered.headers).toMatchObject({ event_type: 'url.created', service: 'urlshortener' });
    expect(await metric('events_retried_total', { topic: 'url_events' })).toBe(retriedBefore + 1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await lettersOf(first.eventId)).toHaveLength(MAX_RETRIES + 1); // it went through this time

    const discarded = await dlq('POST', `/${Number(second.letters.at(-1)!.id)}/discard`);
    expect(discarded.statusCode, discarded.body).toBe(200);
    expect(discarded.json<DeadLetter>()).toMatchObject({ event_id: second.eventId, status: 'discarded' });
    const list = (await dlq('GET', '?status=discarded')).json<DeadLetter[]>();
    expect(list.map((l) => l.event_id)).toContain(second.eventId);
    const stillParked = (await dlq('GET', '?status=parked')).json<DeadLetter[]>();
    expect(stillParked.map((l) => l.event_id)).not.toContain(second.eventId);
    expect(stillParked.map((l) => l.event_id)).not.toContain(first.eventId);

    expectError(await dlq('POST', '/99999999/retry'), 404);
    expectError(await dlq('POST', '/99999999/discard'), 404);
  });

  it.skipIf(!ok)('401 without a session, 403 for a non-admin, 403 without the CSRF token', async () => {
    const { letters } = await parkedEvent();
    const id = Number(letters.at(-1)!.id);
    const routes: ['GET' | 'POST', string][] = [
      ['GET', ''],
      ['GET', `/${id}`],
      ['POST', `/${id}/retry`],
      ['POST', `/${id}/discard`],
    ];
    for (const [method, path] of routes) {
      expectError(await dlq(method, path, {}), 401);
      const nonAdmin = await dlq(method, path, user.headers);
      expectError(nonAdmin, 403);
    }
    // CSRF (spec §5.4): an admin's state-changing request without the header is refused.
    for (const [method, path] of routes.filter(([m]) => m === 'POST')) {
      expectError(
        await dlq(method, path, { cookie: admin.cookie }),
        403,
        'CSRF token missing from X-CSRF-Token header',
      );
    }
    expect((await lettersOf(letters[0]!.event_id)).at(-1)!.status).toBe('parked');
  });
});
