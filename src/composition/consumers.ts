import { countedNotificationSender } from '../adapters/notifications/counted-notification-sender.js';
import { HttpNotificationSender } from '../adapters/notifications/http-notification-sender.js';
import { cacheInvalidationConsumer, type InvalidatableCache } from '../consumers/cache-invalidation.js';
import { eventStoreConsumer } from '../consumers/event-store.js';
import { executorConsumer } from '../consumers/executor.js';
import { notificationFanOut, notificationSender } from '../consumers/notifier.js';
import type { ConsumerDefinition } from '../ports/event-consumer.js';
import type { Sandbox } from '../ports/sandbox.js';
import { PeriodicTask } from '../support/periodic-task.js';
import type { CompositionContext } from './context.js';
import { CONSUMER_BATCH, type EventBackbone } from './event-backbone.js';
import type { Executions } from './executions.js';

/** How often a worker looks for `retrying` dead letters that are due (its own are retried on time). */
const DEAD_LETTER_SWEEP_MS = 5_000;

/** The API's consumers: this instance's redirect cache follows every instance's changes. */
export function apiConsumers(cache: InvalidatableCache): ConsumerDefinition[] {
  return [cacheInvalidationConsumer(cache)];
}

/** The worker's consumers: the event store, the dead letters, the executor and the notifier. */
export function workerConsumers(
  { config, metrics, stack, logger }: CompositionContext,
  backbone: EventBackbone,
  executions: Executions,
  sandbox: Sandbox,
): ConsumerDefinition[] {
  const limits = config.executions;
  // Notifications go over HTTP, each attempt counted in `notifications_total`.
  const sender = countedNotificationSender(new HttpNotificationSender(config.notifications), metrics.registry);
  // Dead letters whose retry came due while no process of theirs was there to publish it.
  const deadLetters = backbone.deadLetters;
  const retries = new PeriodicTask('dead-letter retries', DEAD_LETTER_SWEEP_MS, () => deadLetters.retryDue(), logger);
  retries.start();
  stack.defer('dead-letter retries', async () => {
    await Promise.all([deadLetters.stop(), retries.stop()]);
  });
  return [
    // A worker that dies hands on its event-store batches as fast as its executions.
    eventStoreConsumer(backbone.eventStore, { batchSize: CONSUMER_BATCH, maxWaitMs: 20, ackWaitMs: limits.ackWaitMs }),
    deadLetters.consumer(),
    executorConsumer(executions.repository, sandbox, executions.events, {
      ...config.sandbox,
      maxThreadsPerUser: limits.maxThreadsPerUser,
      // Room to see other users' requests while one user's wait for a thread.
      window: limits.concurrency + limits.maxPendingPerUser,
      ackWaitMs: limits.ackWaitMs,
    }),
    notificationFanOut(executions.notificationRepository, config.tracing.serviceName),
    notificationSender(executions.notificationRepository, sender),
  ];
}
