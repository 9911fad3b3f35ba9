/**
 * A dead letter's automatic retry waits in the table (`retry_at`), not in the dead-letter queue's
 * handler. So: an admin's decision on a letter that is waiting for its retry (status `retrying`,
 * DLQ_RETRY_DELAY_MS not yet over) stands: a discard is not undone by the retry that was pending
 * (nothing is re-published, the letter stays `discarded`), and a retry by hand is the letter's
 * one re-publication, not the first of two; letters behind one another in the queue are all
 * recorded at once, not one delay after another; a due letter is re-published once however many
 * instances try at once, and by the sweep when its own process is gone; and on NATS a delay
 * longer than the ack wait no longer has the bus deliver the dead letter again meanwhile. The
 * decisions and the retries meet in the database (in the distributed mode they run in different
 * processes: the API and a worker), so each case checks the letters' rows and what the consumer
 * was handed. On the embedded bus (both databases) and on NATS JetStream.
 */
import type { Kysely } from 'kysely';
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { KyselyDeadLetterStore } from '../../src/adapters/storage/kysely-dead-letter-store.js';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import type { DeadLetter } from '../../src/domain/dead-letter.js';
import type { MessageHeaders } from '../../src/domain/events.js';
import { useTestApp } from '../helpers/app.js';
import { metricValue } from '../helpers/auth.js';
import { busVariants } from '../helpers/event-buses.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, createMapping, newMapping } from '../helpers/http.js';
import { uniqueNatsPrefix } from '../helpers/nats.js';
import { useRefusingConsumer } from '../helpers/refusing-consumer.js';
import { natsAvailable } from '../helpers/services.js';

const ADMIN = { username: 'dlq_decider', email: 'dlq_decider@example.com', password: 'admin password 1' };
const ATTEMPTS = 2;
/** Long enough that the admin's request lands inside it even on a slow, busy machine. */
const RETRY_DELAY_MS = 4_000;
const ENV = {
  EVENT_HANDLER_ATTEMPTS: String(ATTEMPTS),
  EVENT_RETRY_BACKOFF_MS: '20',
  EVENT_RETRY_MAX_BACKOFF_MS: '40',
  DLQ_MAX_RETRIES: '3',
  DLQ_RETRY_DELAY_MS: String(RETRY_DELAY_MS),
  EVENT_POLL_MS: '50',
  EVENT_LEASE_MS: '2000',
};
const GROUP = 'decided-test-group';

const VARIANTS = busVariants(await natsAvailable(), 'NATS JetStream');

// The variants run at once, each with its own app, database and streams: their tests spend their
// time waiting for retry delays, not computing. Within a variant the tests run one after another
// (`sequential`): they share its app, its consumer and its dead letters.
describe.concurrent.each(VARIANTS)('an admin decides on a dead letter waiting for its retry, on $name', (variant) => {
  const ok = variant.available;
  const t = useTestApp(variant.backend, ENV, {
    accounts: true,
    admin: ADMIN,
    natsPrefix: variant.nats ? uniqueNatsPrefix('dlqd') : undefined,
    when: ok,
  });
  const admin = t.admin;
  let db: Kysely<EventTables>;
  const nextCode = codeMaker(variant.nats ? 'dldn' : variant.backend.name === 'sqlite' ? 'dlds' : 'dldp');
  // Every url event of this suite's own database or streams, however late the group starts.
  const { failing, deliveries } = useRefusingConsumer(t, GROUP, { attempts: ATTEMPTS, startAt: 'earliest' });

  beforeAll(() => {
    if (t.running) db = t.service.database.db as unknown as Kysely<EventTables>;
  });

  const deliveredTimes = (eventId: string) => deliveries.filter((m) => m.envelope.event_id === eventId).length;
  const dlq = (path: string) =>
    t.app.inject({ method: 'POST', url: `/api/v1/admin/dlq${path}`, headers: admin.headers });

  /** A mapping whose url.created the consumer gave up on: its one letter, still waiting for the retry. */
  async function waitingLetter(): Promise<{ code: string; eventId: string; letterId: number }> {
    const body = newMapping(nextCode);
    failing.add(body.code);
    await createMapping(t.app, body);
    const letter = await eventually(async () => {
      const rows = await db.selectFrom('dead_letters').selectAll().where('group_name', '=', GROUP).execute();
      const mine = rows.filter(
        (r) => (JSON.parse(r.envelope) as { payload: { code: string } }).payload.code === body.code,
      );
      expect(mine).toHaveLength(1);
      return mine[0]!;
    });
    expect(letter.status).toBe('retrying');
    return { code: body.code, eventId: letter.event_id, letterId: Number(letter.id) };
  }

  const statusOf = async (id: number) =>
    (await db.selectFrom('dead_letters').select('status').where('id', '=', id).executeTakeFirstOrThrow()).status;
  /** Makes a waiting letter due now, as if its delay were over and its process gone. */
  const dueNow = (id: number) =>
    db
      .updateTable('dead_letters')
      .set({ retry_at: Date.now() - 1 })
      .where('id', '=', id)
      .execute();

  it.skipIf(!ok).sequential(
    'a discard stands, and a retry by hand is the only re-publication, once the pending retries come due',
    async () => {
      const retriedBefore = await metricValue(t.app, 'events_retried_total', { topic: 'url_events' });
      const [discarded, retried] = [await waitingLetter(), await waitingLetter()];
      const decidedAt = Date.now();
      // The admin sees when each goes out unless decided first: one delay after it was recorded.
      const shown = await t.app.inject({
        method: 'GET',
        url: `/api/v1/admin/dlq/${discarded.letterId}`,
        headers: admin.headers,
      });
      expect(shown.statusCode, shown.body).toBe(200);
      const waiting = shown.json<DeadLetter>();
      expect(waiting.status).toBe('retrying');
      expect(Date.parse(waiting.retry_at!) - Date.parse(waiting.created_at)).toBe(RETRY_DELAY_MS);

      // The second one's consumer is fixed before the admin re-publishes it.
      failing.delete(retried.code);
      const discard = await dlq(`/${discarded.letterId}/discard`);
      expect(discard.statusCode, discard.body).toBe(200);
      expect(discard.json<DeadLetter>()).toMatchObject({ status: 'discarded', retry_at: null });
      const retry = await dlq(`/${retried.letterId}/retry`);
      expect(retry.statusCode, retry.body).toBe(200);
      expect(retry.json<DeadLetter>().status).toBe('retried');
      // Both decisions were made while the automatic retries were still waiting.
      expect(Date.now() - decidedAt).toBeLessThan(RETRY_DELAY_MS / 2);
      await eventually(() => expect(deliveredTimes(retried.eventId)).toBe(ATTEMPTS + 1));

      // Past the pending retries' delay, and time for them to have re-published.
      await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS + 1_500));

      expect(await statusOf(discarded.letterId)).toBe('discarded');
      expect(deliveredTimes(discarded.eventId)).toBe(ATTEMPTS);
      expect(await statusOf(retried.letterId)).toBe('retried');
      expect(deliveredTimes(retried.eventId)).toBe(ATTEMPTS + 1);
      // One re-publication in all: the admin's.
      expect(await metricValue(t.app, 'events_retried_total', { topic: 'url_events' })).toBe(retriedBefore + 1);
      const letters = await db.selectFrom('dead_letters').select('id').where('group_name', '=', GROUP).execute();
      expect(letters.map((l) => Number(l.id)).sort((a, b) => a - b)).toEqual(
        [discarded.letterId, retried.letterId].sort((a, b) => a - b),
      );
    },
  );

  it.skipIf(!ok).sequential(
    'letters one behind another in the queue are all recorded before the first is re-published',
    async () => {
      const letters = await Promise.all(
        Array.from({ length: 8 }, async () => {
          const body = newMapping(nextCode);
          failing.add(body.code);
          await createMapping(t.app, body);
          return body.code;
        }),
      );
      const rows = await eventually(async () => {
        const all = await db.selectFrom('dead_letters').selectAll().where('group_name', '=', GROUP).execute();
        const mine = all.filter((r) =>
          letters.includes((JSON.parse(r.envelope) as { payload: { code: string } }).payload.code),
        );
        expect(mine).toHaveLength(letters.length);
        return mine;
      });
      // All recorded, none re-published yet: they wait side by side, each due one delay after its own record.
      expect(rows.every((r) => r.status === 'retrying')).toBe(true);
      for (const row of rows) expect(deliveredTimes(row.event_id)).toBe(ATTEMPTS);
      for (const code of letters) failing.delete(code);
      await eventually(
        async () => {
          for (const row of rows) expect(await statusOf(Number(row.id))).toBe('retried');
        },
        { timeoutMs: RETRY_DELAY_MS + 10_000 },
      );
      // Marked retried once the bus took the re-publication; the consumer is handed it soon after.
      await eventually(() => {
        for (const row of rows) expect(deliveredTimes(row.event_id)).toBe(ATTEMPTS + 1);
      });
    },
  );

  it.skipIf(!ok).sequential(
    'a due letter is re-published once however many try at once, and by the sweep',
    async () => {
      const manager = t.service.events.deadLetters;
      const raced = await waitingLetter();
      const swept = await waitingLetter();
      failing.delete(raced.code);
      failing.delete(swept.code);
      await dueNow(raced.letterId);
      await dueNow(swept.letterId);

      // Two instances reach the same letter at once (and the service's own sweep, every 5 s, may
      // be a third): one of them publishes it.
      const outcomes = await Promise.all([manager.retryIfDue(raced.letterId), manager.retryIfDue(raced.letterId)]);
      expect(outcomes.filter(Boolean).length).toBeLessThanOrEqual(1);
      await eventually(async () => expect(await statusOf(raced.letterId)).toBe('retried'));
      await eventually(() => expect(deliveredTimes(raced.eventId)).toBe(ATTEMPTS + 1));

      // A sweep finds the other one, due with no timer of its own to wait for (this call's, or the
      // service's own if it came first).
      await manager.retryDue();
      await eventually(async () => expect(await statusOf(swept.letterId)).toBe('retried'));
      await eventually(() => expect(deliveredTimes(swept.eventId)).toBe(ATTEMPTS + 1));

      // Their own timers, when they come due, find them taken: nothing more is published.
      await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS + 1_000));
      expect(deliveredTimes(raced.eventId)).toBe(ATTEMPTS + 1);
      expect(deliveredTimes(swept.eventId)).toBe(ATTEMPTS + 1);
    },
  );

  it.skipIf(!ok).sequential(
    "a due letter that no timer of this process waits for is re-published by the worker's sweep",
    async () => {
      // A letter another process recorded and then died with its timer: in the table, due, nothing else.
      const body = newMapping(nextCode);
      await createMapping(t.app, body);
      const stored = await eventually(async () => {
        const rows = await db.selectFrom('event_store').selectAll().where('event_type', '=', 'url.created').execute();
        const row = rows.find((r) => (JSON.parse(r.payload) as { code: string }).code === body.code);
        expect(row).toBeDefined();
        return row!;
      });
      await eventually(() => expect(deliveredTimes(stored.event_id)).toBe(1));
      const id = await new KyselyDeadLetterStore(t.service.database.db).record(
        {
          dlq_event_id: randomUUID(),
          topic: stored.topic,
          partition: stored.partition_no,
          group: GROUP,
          headers: JSON.parse(stored.headers) as MessageHeaders,
          envelope: {
            event_id: stored.event_id,
            event_type: stored.event_type,
            event_version: stored.event_version,
            occurred_at: stored.occurred_at,
            service: stored.service,
            payload: JSON.parse(stored.payload) as unknown,
          },
          error: 'Error: gone with its process',
          attempts: ATTEMPTS,
          status: 'retrying',
          retry_at: Date.now() - 1,
        },
        Date.now(),
      );
      await eventually(async () => expect(await statusOf(id)).toBe('retried'), { timeoutMs: 15_000 });
      await eventually(() => expect(deliveredTimes(stored.event_id)).toBe(2));
    },
  );
});

/** NATS only: the dead letter's message is acknowledged at once, so an ack wait shorter than the delay changes nothing. */
describe.skipIf(!VARIANTS[2]!.available)('a retry delay longer than the NATS ack wait, on NATS JetStream', () => {
  const variant = VARIANTS[2]!;
  const delayMs = 2_500;
  const t = useTestApp(
    variant.backend,
    { ...ENV, DLQ_MAX_RETRIES: '1', DLQ_RETRY_DELAY_MS: String(delayMs), NATS_ACK_WAIT_MS: '1000' },
    { natsPrefix: uniqueNatsPrefix('dlqa'), when: variant.available },
  );
  let db: Kysely<EventTables>;
  const nextCode = codeMaker('dlqa');
  const { failing, deliveries } = useRefusingConsumer(t, GROUP, { attempts: ATTEMPTS, startAt: 'earliest' });
  beforeAll(() => {
    if (t.running) db = t.service.database.db as unknown as Kysely<EventTables>;
  });

  it('retries once, then parks: no letter twice, no re-publication twice', async () => {
    const body = newMapping(nextCode);
    failing.add(body.code);
    await createMapping(t.app, body);
    const lettersOf = async () =>
      (await db.selectFrom('dead_letters').selectAll().where('group_name', '=', GROUP).execute()).filter(
        (r) => (JSON.parse(r.envelope) as { payload: { code: string } }).payload.code === body.code,
      );
    const letters = await eventually(
      async () => {
        const rows = await lettersOf();
        expect(rows.map((r) => r.status)).toEqual(['retried', 'parked']);
        return rows;
      },
      { timeoutMs: delayMs + 10_000 },
    );
    // Two ack waits more: a dead-letter message held past its ack wait would have come again by now.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect((await lettersOf()).map((r) => r.status)).toEqual(['retried', 'parked']);
    expect(deliveries.filter((m) => m.envelope.event_id === letters[0]!.event_id)).toHaveLength(ATTEMPTS * 2);
  });
});
