import type { DeadLetterPayload } from '../../src/domain/dead-letter.js';
import { createEvent, EVENT_TYPES, type EventEnvelope, type MessageHeaders, TOPICS } from '../../src/domain/events.js';
import type { EventBus } from '../../src/ports/event-bus.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** An event on `url_events` that a consumer group gave up on, as the bus handed it. */
export interface GivenUp {
  readonly envelope: EventEnvelope;
  readonly headers: MessageHeaders;
  readonly partition: number;
  readonly offset: number;
}

/**
 * Publishes the dead letter a consumer `group` in another process would write for `original`
 * (three attempts, `reason` as its error), again after every failed publication until the bus
 * acknowledges it; the letter's event id. What was acknowledged is the letter the service owes.
 */
export async function publishDeadLetter(
  bus: EventBus,
  original: GivenUp,
  group: string,
  reason: string,
): Promise<string> {
  const payload: DeadLetterPayload = {
    topic: TOPICS.url,
    partition: original.partition,
    offset: original.offset,
    group,
    attempts: 3,
    error: { name: 'Error', message: reason },
    original: original.envelope,
    headers: original.headers,
  };
  const letter = createEvent(EVENT_TYPES.deadLettered, payload, {
    service: 'gave-up',
    topic: TOPICS.deadLetter,
    key: original.envelope.event_id,
  });
  const headers = { event_type: EVENT_TYPES.deadLettered, service: 'gave-up' };
  for (;;) {
    try {
      await bus.publish(TOPICS.deadLetter, letter.key, headers, letter.envelope, {
        messageId: letter.envelope.event_id,
      });
      return letter.envelope.event_id;
    } catch {
      await sleep(100);
    }
  }
}
