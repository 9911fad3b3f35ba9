/**
 * An event the bus can never take does not jam the outbox (issue 11): a 2 MiB event sitting first
 * in the outbox (written straight into the table, past the size check) is refused by NATS
 * (MAX_PAYLOAD_EXCEEDED, its default max_payload is 1 MiB); it is moved to the dead letters with
 * its error and counted, the events behind it flow on, and an admin's retry of it is refused with
 * 422 without holding anything up. And the size check itself: a change whose event is over
 * EVENT_MAX_BYTES is refused with 422 `{detail}` and leaves nothing behind, on both buses and both
 * databases.
 */
import type { Kysely } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { createEvent, EVENT_TYPES, TOPICS } from '../../src/domain/events.js';
import type { DeadLetter } from '../../src/domain/dead-letter.js';
import { useTestApp } from '../helpers/app.js';
import { metricValue } from '../helpers/auth.js';
import { postgres, sqlite } from '../helpers/backends.js';
import { busVariants } from '../helpers/event-buses.js';
import { storedCreatedByCode } from '../helpers/event-store.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, createMapping, expectError, newMapping, postShorten } from '../helpers/http.js';
import { natsAvailable } from '../helpers/services.js';
import { uniqueNatsPrefix } from '../helpers/nats.js';

const ADMIN = { username: 'poison_admin', email: 'poison_admin@example.com', password: 'admin password 1' };
const natsUp = await natsAvailable();
const backend = postgres.available ? postgres : sqlite;

describe(`a poison event first in the outbox (NATS, ${backend.name})`, () => {
  const ok = natsUp;
  const t = useTestApp(
    backend,
    { EVENT_POLL_MS: '50' },
    { accounts: true, admin: ADMIN, natsPrefix: uniqueNatsPrefix('poi'), when: ok },
  );
  const admin = t.admin;
  let db: Kysely<EventTables>;
  const nextCode = codeMaker('pois');

  beforeAll(() => {
    if (t.running) db = t.service.database.db as unknown as Kysely<EventTables>;
  });

  /** A 2 MiB execution.completed event, written into the outbox as a relay would find it. */
  async function insertPoison(): Promise<string> {
    const event = createEvent(
      EVENT_TYPES.executionCompleted,
      { execution_id: 'poison', result: 'p'.repeat(2 * 1024 * 1024) },
      { service: 'urlshortener', topic: TOPICS.execution, key: 'poison' },
    );
    await db
      .insertInto('event_outbox')
      .values({
        topic: event.topic,
        message_key: event.key,
        event_id: event.envelope.event_id,
        headers: JSON.stringify({ event_type: event.envelope.event_type, service: 'urlshortener' }),
        envelope: JSON.stringify(event.envelope),
        created_at: Date.now(),
      })
      .execute();
    return event.envelope.event_id;
  }

  const poisonMetric = () =>
    metricValue(t.app, 'outbox_dead_lettered_total', {
      topic: TOPICS.execution,
      event_type: EVENT_TYPES.executionCompleted,
    });

  it.skipIf(!ok)('is moved to the dead letters with its error; the events behind it flow on', async () => {
    expect(await poisonMetric()).toBe(0);
    // The relay stopped, so that the poison is surely first and the creates wait behind it.
    await t.service.events.relay.stop();
    const poisonId = await insertPoison();
    const codes: string[] = [];
    for (let i = 0; i < 5; i++) codes.push((await createMapping(t.app, newMapping(nextCode))).code);
    t.service.events.relay.start();

    await eventually(
      async () => {
        const stored = await storedCreatedByCode(db);
        for (const code of codes) expect(stored.get(code), code).toHaveLength(1);
      },
      { timeoutMs: 15_000, intervalMs: 100 },
    );
    // The relay deletes the rows (and moves the poison) just after the broker has taken them.
    await eventually(async () => expect(await db.selectFrom('event_outbox').select('id').execute()).toEqual([]));
    const letters = await db.selectFrom('dead_letters').selectAll().where('event_id', '=', poisonId).execute();
    expect(letters).toHaveLength(1);
    expect(letters[0]).toMatchObject({ group_name: 'outbox-relay', status: 'parked', topic: TOPICS.execution });
    expect(letters[0]!.error).toMatch(/MAX_PAYLOAD_EXCEEDED/);
    expect(await poisonMetric()).toBe(1);
    // Published counts what the bus took: the creates, never the poison.
    const published = (type: string, topic: string) =>
      metricValue(t.app, 'events_published_total', { topic, event_type: type });
    expect(await published(EVENT_TYPES.executionCompleted, TOPICS.execution)).toBe(0);
    expect(await published(EVENT_TYPES.urlCreated, TOPICS.url)).toBeGreaterThanOrEqual(5);

    // Admins see it; a retry is refused with a reason and holds nothing up; it can be discarded.
    const listed = await t.app.inject({ url: '/api/v1/admin/dlq?status=parked', headers: admin.headers });
    const mine = listed.json<DeadLetter[]>().filter((l) => l.event_id === poisonId);
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({ group: 'outbox-relay', event_type: EVENT_TYPES.executionCompleted });
    const retry = await t.app.inject({
      method: 'POST',
      url: `/api/v1/admin/dlq/${mine[0]!.id}/retry`,
      headers: admin.headers,
    });
    expectError(retry, 422, /MAX_PAYLOAD_EXCEEDED/);
    const after = (await createMapping(t.app, newMapping(nextCode))).code;
    await eventually(async () => expect((await storedCreatedByCode(db)).get(after)).toHaveLength(1), {
      timeoutMs: 15_000,
    });
    const discard = await t.app.inject({
      method: 'POST',
      url: `/api/v1/admin/dlq/${mine[0]!.id}/discard`,
      headers: admin.headers,
    });
    expect(discard.json<DeadLetter>().status).toBe('discarded');
    expect(await poisonMetric()).toBe(1);
  });
});

describe.each(busVariants(natsUp, `NATS on ${backend.name}`, backend))(
  'an event over EVENT_MAX_BYTES at append, $name',
  (variant) => {
    const ok = variant.available;
    const t = useTestApp(
      variant.backend,
      { EVENT_MAX_BYTES: '1024', EVENT_POLL_MS: '50' },
      { accounts: true, natsPrefix: variant.nats ? uniqueNatsPrefix('big') : undefined, when: ok },
    );
    let db: Kysely<EventTables>;
    const nextCode = codeMaker('big');

    beforeAll(() => {
      if (t.running) db = t.service.database.db as unknown as Kysely<EventTables>;
    });

    it.skipIf(!ok)(
      'refuses the change with 422 {detail}; nothing is stored; changes beside it go through',
      async () => {
        const big = newMapping(nextCode, { url: `https://example.com/${'a'.repeat(1500)}` });
        const small = Array.from({ length: 8 }, () => newMapping(nextCode));
        // Together, so that on SQLite they share one group commit: the refused change is rolled back alone.
        const [refused, ...accepted] = await Promise.all([big, ...small].map((body) => postShorten(t.app, body)));
        expectError(
          refused!,
          422,
          /^The change is refused: its url\.created event would be \d+ bytes, over the limit of 1024 bytes$/,
        );
        for (const response of accepted) expect(response.statusCode, response.body).toBe(201);

        expect((await t.app.inject({ url: `/${big.code}` })).statusCode).toBe(404);
        await eventually(
          async () => {
            const stored = await storedCreatedByCode(db);
            for (const body of small) expect(stored.get(body.code), body.code).toHaveLength(1);
            expect(stored.has(big.code)).toBe(false);
          },
          { timeoutMs: 15_000, intervalMs: 100 },
        );
        const logged = await db.selectFrom('event_log').select('envelope').execute();
        expect(logged.filter((row) => row.envelope.includes(big.code))).toEqual([]);
        await eventually(async () => expect(await db.selectFrom('event_outbox').select('id').execute()).toEqual([]));
      },
    );
  },
);
