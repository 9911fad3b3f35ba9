import { describe, expect, it } from 'vitest';
import { createEventMetrics } from '../../src/adapters/telemetry/event-metrics.js';
import type { EventMetrics } from '../../src/ports/event-metrics.js';
import { type Counted, onFreshRegistry } from '../helpers/prometheus.js';

/** One contract, every event-metrics adapter (Prometheus counters are the one there is). */
describe.each([{ name: 'prometheus', make: (): Counted<EventMetrics> => onFreshRegistry(createEventMetrics) }])(
  'EventMetrics on $name',
  ({ make }) => {
    it('counts publications by topic and event type', async () => {
      const { metrics, read } = make();
      metrics.published('url_events', 'url.created');
      metrics.published('url_events', 'url.created');
      metrics.published('url_events', 'url.deleted');
      metrics.outboxDeadLettered('url_events', 'url.clicked');
      expect(await read('events_published_total', { topic: 'url_events', event_type: 'url.created' })).toBe(2);
      expect(await read('events_published_total', { topic: 'url_events', event_type: 'url.deleted' })).toBe(1);
      expect(await read('outbox_dead_lettered_total', { topic: 'url_events', event_type: 'url.clicked' })).toBe(1);
    });

    it('counts what each group handled, failed and gave up on, by topic', async () => {
      const { metrics, read } = make();
      metrics.consumed('url_events', 'event-store');
      metrics.failed('url_events', 'notifier');
      metrics.failed('url_events', 'notifier');
      metrics.deadLettered('url_events', 'notifier');
      metrics.retried('url_events');
      expect(await read('events_consumed_total', { topic: 'url_events', group: 'event-store' })).toBe(1);
      expect(await read('events_consumed_total', { topic: 'url_events', group: 'notifier' })).toBeUndefined();
      expect(await read('events_failed_total', { topic: 'url_events', group: 'notifier' })).toBe(2);
      expect(await read('events_dead_lettered_total', { topic: 'url_events', group: 'notifier' })).toBe(1);
      expect(await read('events_retried_total', { topic: 'url_events' })).toBe(1);
    });
  },
);
