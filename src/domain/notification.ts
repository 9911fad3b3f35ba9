import { randomBytes } from 'node:crypto';
import { createEvent, type OutgoingEvent, TOPICS } from './events.js';

export const CHANNEL_TYPES = ['webhook', 'chat'] as const;
export type ChannelType = (typeof CHANNEL_TYPES)[number];

export interface NotificationChannel {
  readonly id: string;
  readonly user_id: number;
  readonly type: ChannelType;
  readonly name: string;
  readonly url: string;
  /** Standard Webhooks signing secret (`whsec_…`), for webhook channels. */
  readonly secret: string | null;
  readonly created_at: string;
}

/** One message to one channel: the unit that is sent, retried and dead-lettered. */
export interface NotificationRequested {
  readonly notification_id: string;
  readonly channel_id: string;
  readonly channel_type: ChannelType;
  readonly user_id: number;
  readonly execution_id: string;
  /** The event that caused it (`execution.completed`, …) and what it said. */
  readonly cause: { readonly event_id: string; readonly event_type: string; readonly payload: unknown };
}

export const NOTIFICATION_REQUESTED = 'notification.requested';

export function notificationRequested(
  service: string,
  request: NotificationRequested,
): OutgoingEvent<NotificationRequested> {
  return createEvent(NOTIFICATION_REQUESTED, request, {
    service,
    topic: TOPICS.notification,
    key: request.channel_id,
  });
}

/** A webhook channel's signing secret, per Standard Webhooks: `whsec_` and 24 random bytes. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}
