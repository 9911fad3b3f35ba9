import { EVENT_TYPES, TOPICS, uuidv7 } from '../domain/events.js';
import { type NotificationRequested, notificationRequested, NOTIFICATION_REQUESTED } from '../domain/notification.js';
import type { NotificationRepository } from '../ports/notification-repository.js';
import type { NotificationSender } from '../ports/notification-sender.js';
import type { ConsumerDefinition } from '../ports/event-consumer.js';
import { recordSideEffect } from '../support/after-side-effect.js';

const FINAL_EVENTS: ReadonlySet<string> = new Set([
  EVENT_TYPES.executionCompleted,
  EVENT_TYPES.executionFailed,
  EVENT_TYPES.executionTimedOut,
]);

interface ExecutionOutcomePayload {
  readonly execution_id: string;
  readonly user_id: number;
}

/**
 * On each final execution event, one `notification.requested` per channel of the owner, recorded
 * once per event (a redelivery fans out nothing new).
 */
export function notificationFanOut(repository: NotificationRepository, service: string): ConsumerDefinition {
  return {
    group: 'notifier',
    topics: [TOPICS.execution],
    handle: async (message) => {
      if (!FINAL_EVENTS.has(message.envelope.event_type)) return;
      const outcome = message.envelope.payload as ExecutionOutcomePayload;
      const channels = await repository.listChannels(outcome.user_id);
      if (channels.length === 0) return;
      await repository.recordRequests(message.envelope.event_id, () =>
        channels.map((channel) =>
          notificationRequested(service, {
            notification_id: uuidv7(),
            channel_id: channel.id,
            channel_type: channel.type,
            user_id: outcome.user_id,
            execution_id: outcome.execution_id,
            cause: {
              event_id: message.envelope.event_id,
              event_type: message.envelope.event_type,
              payload: message.envelope.payload,
            },
          }),
        ),
      );
    },
  };
}

/** Sends one notification to one channel; a failure is retried by the consumer runner, then dead-lettered. */
export function notificationSender(repository: NotificationRepository, sender: NotificationSender): ConsumerDefinition {
  return {
    group: 'notification-sender',
    topics: [TOPICS.notification],
    handle: async (message, span) => {
      if (message.envelope.event_type !== NOTIFICATION_REQUESTED) return;
      const request = message.envelope.payload as NotificationRequested;
      span.setAttributes({
        'notification.id': request.notification_id,
        'notification.channel': request.channel_type,
        'notification.channel_id': request.channel_id,
        'execution.id': request.execution_id,
      });
      if (await repository.wasDelivered(request.notification_id)) return;
      const channel = await repository.getChannel(request.channel_id);
      if (!channel) return; // deleted since: nothing to send
      await sender.send(channel, request);
      // Written again if the database refuses it for a moment: unrecorded, it would be sent twice.
      await recordSideEffect(() => repository.markDelivered(request.notification_id, channel.id));
    },
  };
}
