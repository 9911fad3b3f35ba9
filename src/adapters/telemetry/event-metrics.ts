import { Counter, type Registry } from 'prom-client';

/** Counters of the event backbone, on the process's registry. */
export interface EventMetrics {
  published(topic: string, eventType: string): void;
  consumed(topic: string, group: string): void;
  failed(topic: string, group: string): void;
  deadLettered(topic: string, group: string): void;
  retried(topic: string): void;
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
  return {
    published: (topic, eventType) => published.inc({ topic, event_type: eventType }),
    consumed: (topic, group) => consumed.inc({ topic, group }),
    failed: (topic, group) => failed.inc({ topic, group }),
    deadLettered: (topic, group) => deadLettered.inc({ topic, group }),
    retried: (topic) => retried.inc({ topic }),
  };
}
