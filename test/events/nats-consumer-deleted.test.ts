/**
 * A group whose JetStream consumers the broker deletes under it, while it runs: a group that
 * follows only what comes next loses its consumer after an hour idle (`inactive_threshold`), and
 * an operator, or a broker restarted without its state, may delete any. The bus makes the consumer
 * again and the group goes on: what is published after the deletion arrives, for a group that
 * follows what comes next as for one that reads from the start (which is handed the stream again
 * from its start: its consumers are idempotent by `event_id`). The real NATS server; the
 * consumers deleted through JetStream's API, as `nats consumer rm` does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NatsEventBus } from '../../src/adapters/event-bus/nats-event-bus.js';
import { createEvent, EVENT_TYPES, TOPICS } from '../../src/domain/events.js';
import type { BusMessage, Subscription } from '../../src/ports/event-bus.js';
import { eventually } from '../helpers/eventually.js';
import { connectTestNatsBus, deleteNatsConsumers, deleteNatsStreams, uniqueNatsPrefix } from '../helpers/nats.js';
import { NATS_URL, natsAvailable } from '../helpers/services.js';

const available = await natsAvailable();

describe.skipIf(!available)('a NATS group whose consumers are deleted while it runs', () => {
  const prefix = uniqueNatsPrefix('gone');
  let publisher: NatsEventBus;
  let subscriber: NatsEventBus;
  const subscriptions: Subscription[] = [];

  beforeAll(async () => {
    publisher = await connectTestNatsBus(NATS_URL, prefix);
    subscriber = await connectTestNatsBus(NATS_URL, prefix);
  });
  afterAll(async () => {
    for (const subscription of subscriptions) await subscription.close();
    await subscriber?.close();
    await publisher?.close();
    await deleteNatsStreams(prefix);
  });

  let n = 0;
  const publish = async () => {
    const code = `gone${++n}`;
    const event = createEvent(
      EVENT_TYPES.urlUpdated,
      { code, url: `https://example.com/${code}` },
      { service: 'test', topic: TOPICS.url, key: code },
    );
    await publisher.publish(TOPICS.url, code, { event_type: EVENT_TYPES.urlUpdated }, event.envelope);
    return event.envelope.event_id;
  };
  const follow = async (group: string, startAt?: 'latest') => {
    const handed: string[] = [];
    subscriptions.push(
      await subscriber.subscribe({
        group,
        topic: TOPICS.url,
        ...(startAt ? { startAt } : {}),
        handler: async (message: BusMessage) => void handed.push(message.envelope.event_id),
      }),
    );
    return handed;
  };

  it('makes them again and hands on what is published after, to both kinds of group', async () => {
    const next = await follow('follows-next', 'latest');
    const all = await follow('reads-all');
    const first = await publish();
    await eventually(() => {
      expect(next).toContain(first);
      expect(all).toContain(first);
    });

    expect(await deleteNatsConsumers(prefix)).toBeGreaterThanOrEqual(2);
    const afterDeletion = [await publish(), await publish()];
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    afterDeletion.push(await publish());

    await eventually(
      () => {
        for (const id of afterDeletion) {
          expect(next, 'the group that follows what comes next').toContain(id);
          expect(all, 'the group that reads from the start').toContain(id);
        }
      },
      { timeoutMs: 15_000, intervalMs: 100 },
    );
    // Each published after the deletion once to the group that follows what comes next (its
    // consumer starts a second before it last followed: the first, at most, again).
    for (const id of afterDeletion) expect(next.filter((handed) => handed === id)).toHaveLength(1);
  });
});
