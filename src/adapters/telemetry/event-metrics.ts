import { Counter, type Registry } from 'prom-client';

/** Counters of the event backbone, on the process's registry. */
export interface EventMetrics {
  published(topic: string, eventType: string): void;
  consumed(topic: string, group: string): void;
  failed(topic: string, group: string): void;
  deadLettered(topic: string, group: string): void;
  retried(topic: string): void;
}

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

export function createEventMetrics(registry: Registry): EventMetrics {
  const registers = [registry];
  const published = new Counter({
    name: 'events_published_total',
    help: 'Events handed to the bus, by topic and event type.',
    labelNames: ['topic', 'event_type'],
    registers,
  });
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
    consumed: (topic, group) => consumedBy(topic, group).inc(),
    failed: (topic, group) => failed.inc({ topic, group }),
    deadLettered: (topic, group) => deadLettered.inc({ topic, group }),
    retried: (topic) => retried.inc({ topic }),
  };
}
