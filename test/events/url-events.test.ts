/**
 * URL mapping events on the embedded bus (issue #5): `url.created`, `url.updated`, `url.deleted`
 * and `url.clicked` batches are recorded with the change (the embedded log is the outbox), persisted by
 * the event store consumer into `event_store` once per event id, and counted on `GET /metrics`.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { createEvent, type EventEnvelope, TOPICS } from '../../src/domain/events.js';
import type { Kysely } from 'kysely';
import { useTestApp } from '../helpers/app.js';
import { metricValue } from '../helpers/auth.js';
import { BACKENDS } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, createMapping, HTTP_TEST_ENV, newMapping, patchMapping, postShorten } from '../helpers/http.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const EVENT_ENV = { ...HTTP_TEST_ENV, EVENT_POLL_MS: '50', EVENT_LEASE_MS: '2000', CLICK_FLUSH_INTERVAL_MS: '60000' };

type StoreRow = EventTables['event_store'];

describe.each(BACKENDS)('URL events on $name (embedded bus)', (backend) => {
  const t = useTestApp(backend, EVENT_ENV);
  let db: Kysely<EventTables>;
  const nextCode = codeMaker(backend.name === 'sqlite' ? 'uevs' : 'uevp');

  beforeAll(() => {
    if (t.running) db = t.service.database.db as unknown as Kysely<EventTables>;
  });

  const storedOfType = (type: string) =>
    db.selectFrom('event_store').selectAll().where('event_type', '=', type).orderBy('event_id').execute();

  /** The stored events whose payload names `code`, in order. */
  async function storedFor(code: string): Promise<StoreRow[]> {
    const rows = await db.selectFrom('event_store').selectAll().where('topic', '=', TOPICS.url).execute();
    return rows
      .filter((r) => (JSON.parse(r.payload) as { code?: string }).code === code)
      .sort((a, b) => (a.event_id < b.event_id ? -1 : 1));
  }

  it.skipIf(!backend.available)(
    'created, updated and deleted each persist one event in event_store with its payload and headers',
    async () => {
      const body = newMapping(nextCode, { url: 'https://example.com/first' });
      const created = await createMapping(t.service.app, body);
      const newCode = nextCode();
      const patched = await patchMapping(t.service.app, body.code, {
        code: newCode,
        url: 'https://example.com/second',
      });
      expect(patched.statusCode, patched.body).toBe(200);
      const deleted = await t.service.app.inject({ method: 'DELETE', url: `/${newCode}` });
      expect(deleted.statusCode, deleted.body).toBe(204);

      const rows = await eventually(async () => {
        const all = [...(await storedFor(body.code)), ...(await storedFor(newCode))];
        const unique = [...new Map(all.map((r) => [r.event_id, r])).values()];
        expect(unique.map((r) => r.event_type).sort()).toEqual(['url.created', 'url.deleted', 'url.updated']);
        return unique.sort((a, b) => (a.event_id < b.event_id ? -1 : 1));
      });
      // UUIDv7 ids sort by time: the order of the changes.
      expect(rows.map((r) => r.event_type)).toEqual(['url.created', 'url.updated', 'url.deleted']);
      for (const row of rows) {
        expect(row.event_id).toMatch(UUID_V7);
        expect(row.topic).toBe('url_events');
        expect(row.event_version).toBe(1);
        expect(row.service).toBe('urlshortener');
        expect(row.execution_id).toBeNull();
        expect(Number.isNaN(Date.parse(row.occurred_at))).toBe(false);
        const headers = JSON.parse(row.headers) as Record<string, string>;
        // Tracing is off here and no context came in: no trace headers rather than empty ones.
        expect(Object.keys(headers).sort()).toEqual(['event_type', 'service']);
        expect(headers).toMatchObject({ event_type: row.event_type, service: 'urlshortener' });
      }
      const [createdRow, updatedRow, deletedRow] = rows.map((r) => JSON.parse(r.payload) as Record<string, unknown>);
      expect(createdRow).toMatchObject({
        id: created.id,
        code: body.code,
        url: 'https://example.com/first',
        owner: null,
      });
      expect(updatedRow).toMatchObject({
        id: created.id,
        code: newCode,
        previous_code: body.code,
        url: 'https://example.com/second',
        owner: null,
      });
      expect(deletedRow).toEqual({ id: created.id, code: newCode, owner: null });
      // All three share the mapping's key, hence one partition, in order.
      expect(new Set(rows.map((r) => r.partition_no)).size).toBe(1);
      const offsets = rows.map((r) => Number(r.log_offset));
      expect([...offsets].sort((a, b) => a - b)).toEqual(offsets);
    },
  );

  it.skipIf(!backend.available)('a refused change records no event', async () => {
    const body = newMapping(nextCode);
    await createMapping(t.service.app, body);
    const again = await postShorten(t.service.app, { ...body, url: 'https://example.com/other' });
    expect(again.statusCode).toBe(409);
    const missing = await t.service.app.inject({ method: 'DELETE', url: `/${nextCode()}` });
    expect(missing.statusCode).toBe(404);
    // A later event on the same mapping's partition shows the consumer got past this point.
    const del = await t.service.app.inject({ method: 'DELETE', url: `/${body.code}` });
    expect(del.statusCode).toBe(204);
    const rows = await eventually(async () => {
      const r = await storedFor(body.code);
      expect(r.map((x) => x.event_type)).toContain('url.deleted');
      return r;
    });
    expect(rows.map((r) => r.event_type)).toEqual(['url.created', 'url.deleted']);
    const outbox = await db.selectFrom('event_outbox').select('event_id').execute();
    expect(outbox).toEqual([]);
  });

  it.skipIf(!backend.available)('clicks are flushed as one url.clicked batch event', async () => {
    const a = await createMapping(t.service.app, newMapping(nextCode));
    const b = await createMapping(t.service.app, newMapping(nextCode));
    for (let i = 0; i < 3; i++) expect((await t.service.app.inject({ url: `/${a.code}` })).statusCode).toBe(302);
    for (let i = 0; i < 2; i++) expect((await t.service.app.inject({ url: `/${b.code}` })).statusCode).toBe(302);
    const before = new Set((await storedOfType('url.clicked')).map((r) => r.event_id));
    await t.service.clicks.flush();

    const batch = await eventually(async () => {
      const fresh = (await storedOfType('url.clicked')).filter((r) => !before.has(r.event_id));
      expect(fresh).toHaveLength(1);
      return fresh[0]!;
    });
    const payload = JSON.parse(batch.payload) as { clicks: { id: number; count: number }[] };
    expect([...payload.clicks].sort((x, y) => x.id - y.id)).toEqual(
      [
        { id: a.id, count: 3 },
        { id: b.id, count: 2 },
      ].sort((x, y) => x.id - y.id),
    );
    expect(batch.topic).toBe('url_events');
  });

  it.skipIf(!backend.available)(
    'the event is in the log when the answer leaves: the embedded log is the outbox, written in the same transaction',
    async () => {
      // The relay has nothing to do on the embedded bus: stopped, it changes nothing.
      await t.service.events.relay.stop();
      let code: string;
      try {
        code = (await createMapping(t.service.app, newMapping(nextCode))).code;
        const logged = await db.selectFrom('event_log').selectAll().where('topic', '=', TOPICS.url).execute();
        const mine = logged.filter(
          (r) => (JSON.parse(r.envelope) as EventEnvelope<{ code: string }>).payload.code === code,
        );
        expect(mine).toHaveLength(1);
        expect(JSON.parse(mine[0]!.headers)).toMatchObject({ event_type: 'url.created', service: 'urlshortener' });
        expect(await db.selectFrom('event_outbox').selectAll().execute()).toEqual([]);
        await eventually(async () => expect((await storedFor(code)).map((r) => r.event_type)).toEqual(['url.created']));
      } finally {
        t.service.events.relay.start();
      }
    },
  );

  it.skipIf(!backend.available)('the event store keeps one row per event id, however often it arrives', async () => {
    const created = await createMapping(t.service.app, newMapping(nextCode));
    const [row] = await eventually(async () => {
      const r = await storedFor(created.code);
      expect(r).toHaveLength(1);
      return r;
    });
    const envelope: EventEnvelope = {
      event_id: row!.event_id,
      event_type: row!.event_type,
      event_version: row!.event_version,
      occurred_at: row!.occurred_at,
      service: row!.service,
      payload: JSON.parse(row!.payload),
    };
    const headers = JSON.parse(row!.headers) as Record<string, string>;
    const key = String(created.id);
    // Deliberate re-publications (new message ids) of the same event, then a marker behind them.
    for (let i = 0; i < 3; i++) {
      await t.service.events.bus.publish(TOPICS.url, key, headers, envelope, {
        messageId: `${envelope.event_id}:dup${i}`,
      });
    }
    const marker = createEvent('test.marker', { code: created.code }, { service: 'test', topic: TOPICS.url, key });
    await t.service.events.bus.publish(TOPICS.url, key, { ...headers, event_type: 'test.marker' }, marker.envelope);
    await eventually(async () =>
      expect((await storedFor(created.code)).map((r) => r.event_type)).toEqual(['url.created', 'test.marker']),
    );
    const copies = await db
      .selectFrom('event_store')
      .select('event_id')
      .where('event_id', '=', envelope.event_id)
      .execute();
    expect(copies).toHaveLength(1);
  });

  it.skipIf(!backend.available)('GET /metrics counts published and consumed events', async () => {
    const app = t.service.app;
    const published = () =>
      metricValue(app, 'events_published_total', { topic: 'url_events', event_type: 'url.created' });
    const consumed = () => metricValue(app, 'events_consumed_total', { topic: 'url_events', group: 'event-store' });
    const publishedBefore = await published();
    const consumedBefore = await consumed();
    const created = await createMapping(app, newMapping(nextCode));
    await eventually(async () => expect(await storedFor(created.code)).toHaveLength(1));
    await eventually(async () => expect(await published()).toBe(publishedBefore + 1));
    await eventually(async () => expect(await consumed()).toBeGreaterThanOrEqual(consumedBefore + 1));
    const text = (await app.inject({ url: '/metrics' })).body;
    for (const name of [
      'events_published_total',
      'events_consumed_total',
      'events_failed_total',
      'events_dead_lettered_total',
      'events_retried_total',
    ]) {
      expect(text).toContain(`# TYPE ${name} counter`);
    }
  });
});
