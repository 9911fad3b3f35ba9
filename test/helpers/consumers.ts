import { afterAll, beforeAll } from 'vitest';
import { type ConsumerDefinition, ConsumerRunner, type RetryPolicy } from '../../src/services/consumer-runner.js';
import type { SuiteTestApp } from './app.js';

/**
 * A consumer group of the test's own on the app's bus, with its own retry policy: started in a
 * `beforeAll` after the app (when the app runs), stopped in the `afterAll` before it closes.
 */
export function useTestConsumer(app: SuiteTestApp, policy: RetryPolicy, consumer: ConsumerDefinition): void {
  let runner: ConsumerRunner | undefined;
  beforeAll(async () => {
    if (!app.running) return;
    const { bus, metrics } = app.service.events;
    runner = new ConsumerRunner(bus, policy, metrics, { warn: () => undefined }, 'urlshortener');
    await runner.start(consumer);
  });
  afterAll(async () => {
    await runner?.stop();
  });
}
