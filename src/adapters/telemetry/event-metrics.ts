import { Counter, type Registry } from 'prom-client';
import type { EventMetrics } from '../../ports/event-metrics.js';
import { scrapeGauges } from './scrape-gauges.js';

/** The counter's child for two label values, kept once made. */
function childrenOf<L extends string>(
  counter: Counter<L>,
  labels: (a: string, b: string) => Partial<Record<L, string>>,
): (a: string, b: string) => { inc(): void } {
  const children = new Map<string, { inc(): void }>();
  return (a, b) => {
    const key = `${a}\u0000${b}`;
    let child = children.get(key);
    if (child === undefined) {
      child = counter.labels(labels(a, b));
      children.set(key, child);
    }
    return child;
  };
}

/** The outbox's backlog as the gauges show it. */
export interface OutboxFigures {
  readonly depth: number;
  readonly oldestAgeSeconds: number;
}

/**
 * `outbox_depth` and `outbox_oldest_age_seconds`, measured at each scrape by `backlog`; when it
 * fails (the database away), the gauges keep their last values.
 */
function outboxGauges(registry: Registry, backlog: () => Promise<OutboxFigures>): void {
  scrapeGauges(registry, backlog, [
    {
      name: 'outbox_depth',
      help: 'Events waiting in the transactional outbox for the bus to take them (0 with the embedded bus: its log is the outbox).',
      value: (figures) => figures.depth,
    },
    {
      name: 'outbox_oldest_age_seconds',
      help: 'How long the oldest event waiting in the outbox has waited (0 when none waits).',
      value: (figures) => figures.oldestAgeSeconds,
    },
  ]);
}

/** The event backbone's counters (and the outbox gauges, given `backlog`) on the process's registry. */
export function createEventMetrics(registry: Registry, backlog?: () => Promise<OutboxFigures>): EventMetrics {
  const registers = [registry];
  const published = new Counter({
    name: 'events_published_total',
    help: 'Events the bus took, by topic and event type (with NATS: acknowledged by the broker).',
    labelNames: ['topic', 'event_type'],
    registers,
  });
  const outboxDeadLettered = new Counter({
    name: 'outbox_dead_lettered_total',
    help: 'Events the bus can never take (too large, not encodable), moved from the outbox to the dead letters.',
    labelNames: ['topic', 'event_type'],
    registers,
  });
  if (backlog) outboxGauges(registry, backlog);
  const consumed = new Counter({
    name: 'events_consumed_total',
    help: 'Events a consumer group handled successfully.',
    labelNames: ['topic', 'group'],
    registers,
  });
  const failed = new Counter({
    name: 'events_failed_total',
    help: 'Failed attempts of a consumer group at an event.',
    labelNames: ['topic', 'group'],
    registers,
  });
  const deadLettered = new Counter({
    name: 'events_dead_lettered_total',
    help: 'Events sent to the dead-letter queue after the last failed attempt.',
    labelNames: ['topic', 'group'],
    registers,
  });
  const retried = new Counter({
    name: 'events_retried_total',
    help: 'Dead-lettered events re-published to their topic.',
    labelNames: ['topic'],
    registers,
  });
  // Counted for every event: each label set's child is looked up once, not hashed at every count.
  const publishedBy = childrenOf(published, (topic: string, eventType: string) => ({ topic, event_type: eventType }));
  const consumedBy = childrenOf(consumed, (topic: string, group: string) => ({ topic, group }));
  return {
    published: (topic, eventType) => publishedBy(topic, eventType).inc(),
    outboxDeadLettered: (topic, eventType) => outboxDeadLettered.inc({ topic, event_type: eventType }),
    consumed: (topic, group) => consumedBy(topic, group).inc(),
    failed: (topic, group) => failed.inc({ topic, group }),
    deadLettered: (topic, group) => deadLettered.inc({ topic, group }),
    retried: (topic) => retried.inc({ topic }),
  };
}
