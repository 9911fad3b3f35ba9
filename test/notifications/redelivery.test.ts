/**
 * The notification consumers given the same event more than once (design: delivery is at least
 * once, every consumer idempotent by `event_id`): NATS delivers again what it did not see
 * acknowledged, the embedded log what a member that died had not committed, and either may hand
 * it to another instance while the first still works on it. Real databases and a real HTTP
 * receiver; the deliveries are the consumers' handlers called as the consumer runner calls them,
 * from two instances (on PostgreSQL two pools; on SQLite one connection, see useOtherInstance) at
 * once, so the checker counts what each event caused against what it should have caused. A
 * delivery the database refuses to record for a moment after the webhook went out is recorded
 * again, not sent again.
 */
import { randomUUID } from 'node:crypto';
import { trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpNotificationSender } from '../../src/adapters/notifications/http-notification-sender.js';
import { TransactionalOutbox } from '../../src/adapters/event-bus/outbox.js';
import type { Database } from '../../src/adapters/storage/database.js';
import { KyselyNotificationRepository } from '../../src/adapters/storage/kysely-notification-repository.js';
import { notificationFanOut, notificationSender } from '../../src/consumers/notifier.js';
import { createEvent, EVENT_TYPES, TOPICS } from '../../src/domain/events.js';
import type { ConsumerDefinition } from '../../src/ports/event-consumer.js';
import type { BusMessage } from '../../src/ports/event-bus.js';
import type { EventEnvelope } from '../../src/domain/events.js';
import { BACKENDS } from '../helpers/backends.js';
import { useOpenDatabase, useOtherInstance } from '../helpers/storage.js';
import { Receiver } from './receiver.js';

const SERVICE = 'redelivery-test';
const span = trace.getTracer('redelivery-test').startSpan('test');

/** The message a bus would hand a consumer on its first delivery (`deliverAll` counts the rest). */
function delivered(envelope: EventEnvelope, topic: string): BusMessage {
  return { topic, partition: 0, offset: 0, headers: {}, envelope, deliveryCount: 1, inProgress: () => {} };
}

/** The fan-out's event for one webhook notification of a completed execution. */
function notificationRequested(notificationId: string, channelId: string, userId: number) {
  return createEvent(
    'notification.requested',
    {
      notification_id: notificationId,
      channel_id: channelId,
      channel_type: 'webhook',
      user_id: userId,
      execution_id: randomUUID(),
      cause: { event_id: randomUUID(), event_type: EVENT_TYPES.executionCompleted, payload: {} },
    },
    { service: SERVICE, topic: TOPICS.notification, key: channelId },
  );
}

describe.each(BACKENDS)('notification consumers given an event again, on $name', (backend) => {
  const opened = useOpenDatabase(backend);
  const other = useOtherInstance(backend, opened);
  const receiver = new Receiver();
  beforeAll(async () => {
    if (backend.available) await receiver.listen();
  });
  afterAll(async () => {
    if (backend.available) await receiver.close();
  });

  /** One instance's consumers, on its own database connection and outbox. */
  const instance = (database: Database) => {
    const repository = new KyselyNotificationRepository(
      database.db,
      database.dialect,
      new TransactionalOutbox(SERVICE),
    );
    return {
      repository,
      fanOut: notificationFanOut(repository, SERVICE),
      sender: notificationSender(repository, new HttpNotificationSender({ allowPrivate: true, timeoutMs: 5000 })),
    };
  };
  const requestedFor = async (database: Database, causes: ReadonlySet<string>) => {
    const rows = await database.db.selectFrom('event_outbox').select('envelope').execute();
    return rows
      .map((row) => JSON.parse(row.envelope) as EventEnvelope)
      .filter((e) => e.event_type === 'notification.requested')
      .filter((e) => causes.has((e.payload as { cause: { event_id: string } }).cause.event_id));
  };
  /** Each message to each consumer `times` times, alternately through the two instances, all at once. */
  const deliverAll = (consumers: readonly ConsumerDefinition[], messages: readonly BusMessage[], times: number) =>
    Promise.all(
      messages.flatMap((message) =>
        Array.from({ length: times }, (_, n) =>
          consumers[n % consumers.length]!.handle({ ...message, deliveryCount: n + 1 }, span),
        ),
      ),
    );

  it.skipIf(!backend.available)(
    'each final execution event fans out once to each channel, however often and wherever it arrives',
    async () => {
      const [a, b] = [instance(opened.database), instance(other)];
      const userId = 4000 + Math.floor(Math.random() * 1000);
      for (const name of ['first', 'second'])
        await a.repository.createChannel(
          {
            id: randomUUID(),
            user_id: userId,
            type: 'webhook',
            name,
            url: `${receiver.url}/fan-out/${name}`,
            secret: null,
          },
          10,
        );
      const outcomes = Array.from({ length: 12 }, (_, i) =>
        createEvent(
          i % 3 === 2 ? EVENT_TYPES.executionFailed : EVENT_TYPES.executionCompleted,
          { execution_id: randomUUID(), user_id: userId },
          { service: SERVICE, topic: TOPICS.execution, key: String(userId) },
        ),
      );
      await deliverAll(
        [a.fanOut, b.fanOut],
        outcomes.map((event) => delivered(event.envelope, TOPICS.execution)),
        4,
      );
      const requested = await requestedFor(opened.database, new Set(outcomes.map((e) => e.envelope.event_id)));
      const byCause = new Map<string, number>();
      for (const e of requested) {
        const cause = (e.payload as { cause: { event_id: string } }).cause.event_id;
        byCause.set(cause, (byCause.get(cause) ?? 0) + 1);
      }
      expect(byCause.size).toBe(outcomes.length);
      for (const event of outcomes) expect(byCause.get(event.envelope.event_id), event.envelope.event_id).toBe(2);
    },
  );

  it.skipIf(!backend.available)(
    'a notification delivered again after it was sent is not sent again, by either instance',
    async () => {
      const [a, b] = [instance(opened.database), instance(other)];
      const channel = (await a.repository.createChannel(
        {
          id: randomUUID(),
          user_id: 1,
          type: 'webhook',
          name: 'sent once',
          url: `${receiver.url}/sent-once`,
          secret: 'whsec_' + Buffer.from('a secret of the test, long enough').toString('base64'),
        },
        10,
      ))!;
      const requests = Array.from({ length: 8 }, () => notificationRequested(randomUUID(), channel.id, 1));
      const messages = requests.map((event) => delivered(event.envelope, TOPICS.notification));
      await deliverAll([a.sender], messages, 1); // the first delivery: sent, and recorded as delivered
      // Delivered again (an acknowledgement that was lost), to both instances, at once.
      await deliverAll([a.sender, b.sender], messages, 4);
      const received = receiver.requests.filter((r) => r.path === '/sent-once');
      expect(received.map((r) => r.headers['webhook-id']).sort()).toEqual(
        requests.map((e) => (e.envelope.payload as { notification_id: string }).notification_id).sort(),
      );
    },
  );

  it.skipIf(!backend.available)(
    'a delivery the database refuses to record for a moment after the send is recorded again, not sent twice',
    async () => {
      const { repository } = instance(opened.database);
      const channel = (await repository.createChannel(
        {
          id: randomUUID(),
          user_id: 2,
          type: 'webhook',
          name: 'recorded after a refusal',
          url: `${receiver.url}/recorded-again`,
          secret: null,
        },
        10,
      ))!;
      // The connection dropped as the delivery was being recorded, twice (what the two-process
      // test with PostgreSQL's connections dropped saw send a notification twice).
      let refusals = 2;
      const flaky = Object.create(repository) as KyselyNotificationRepository;
      flaky.markDelivered = async (...args) => {
        if (refusals-- > 0) throw new Error('Connection terminated unexpectedly');
        return repository.markDelivered(...args);
      };
      const sender = notificationSender(flaky, new HttpNotificationSender({ allowPrivate: true, timeoutMs: 5000 }));
      const notificationId = randomUUID();
      const request = notificationRequested(notificationId, channel.id, 2);
      await sender.handle(delivered(request.envelope, TOPICS.notification), span);
      expect(refusals).toBe(-1);
      expect(await repository.wasDelivered(notificationId)).toBe(true);
      // Handed over again (its acknowledgement lost as well): nothing more is sent.
      await sender.handle(delivered(request.envelope, TOPICS.notification), span);
      expect(receiver.requests.filter((r) => r.path === '/recorded-again')).toHaveLength(1);
    },
  );
});
