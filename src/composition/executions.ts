import { DnsDestinationGuard } from '../adapters/notifications/destination-guard.js';
import type { Database } from '../adapters/storage/database.js';
import { KyselyExecutionRepository } from '../adapters/storage/kysely-execution-repository.js';
import { KyselyNotificationRepository } from '../adapters/storage/kysely-notification-repository.js';
import { executionEvents } from '../domain/execution.js';
import type { ExecutionRepository } from '../ports/execution-repository.js';
import type { NotificationRepository } from '../ports/notification-repository.js';
import { ExecutionService } from '../services/execution-service.js';
import { NotificationService } from '../services/notification-service.js';
import type { CompositionContext } from './context.js';
import type { EventBackbone } from './event-backbone.js';

export interface Executions {
  readonly service: ExecutionService;
  readonly repository: ExecutionRepository;
  readonly events: ReturnType<typeof executionEvents>;
  readonly notifications: NotificationService;
  readonly notificationRepository: NotificationRepository;
}

/** Scripts run in the sandbox and the channels told when one ends: their repositories and services. */
export function composeExecutions(
  { config }: CompositionContext,
  database: Database,
  backbone: EventBackbone,
): Executions {
  const repository = new KyselyExecutionRepository(database.db, database.dialect, backbone.outbox);
  const events = executionEvents(config.tracing.serviceName);
  const service = new ExecutionService(repository, events, { maxPendingPerUser: config.executions.maxPendingPerUser });
  const notificationRepository = new KyselyNotificationRepository(database.db, database.dialect, backbone.outbox);
  const notifications = new NotificationService(notificationRepository, new DnsDestinationGuard(), {
    allowPrivate: config.notifications.allowPrivate,
    maxChannelsPerUser: config.notifications.maxChannelsPerUser,
  });
  return { service, repository, events, notifications, notificationRepository };
}
