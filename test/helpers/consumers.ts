import { afterAll, beforeAll } from 'vitest';
import type { EventMetrics } from '../../src/ports/event-metrics.js';
import type { EventBus } from '../../src/ports/event-bus.js';
import { ConsumerRunner, type RetryPolicy } from '../../src/adapters/event-bus/consumer-runner.js';
import type { ConsumerDefinition } from '../../src/ports/event-consumer.js';
import type { SuiteTestApp } from './app.js';

/** A consumer group of the test's own on `bus`, with its own retry policy; the caller stops it. */
export async function startTestConsumer(
  bus: EventBus,
  metrics: EventMetrics,
  policy: RetryPolicy,
  consumer: ConsumerDefinition,
): Promise<ConsumerRunner> {
  const runner = new ConsumerRunner(bus, policy, metrics, { warn: () => undefined }, 'urlshortener');
  await runner.start(consumer);
  return runner;
}

/**
 * A consumer group of the test's own on the app's bus, with its own retry policy: started in a
 * `beforeAll` after the app (when the app runs), stopped in the `afterAll` before it closes.
 */
export function useTestConsumer(app: SuiteTestApp, policy: RetryPolicy, consumer: ConsumerDefinition): void {
  let runner: ConsumerRunner | undefined;
  beforeAll(async () => {
    if (!app.running) return;
    const { bus, metrics } = app.service.events;
    runner = await startTestConsumer(bus, metrics, policy, consumer);
  });
  afterAll(async () => {
    await runner?.stop();
  });
}
