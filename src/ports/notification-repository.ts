import type { EventsFor } from '../domain/events.js';
import type { NotificationChannel } from '../domain/notification.js';

/** Notification channels and the record of what was delivered. */
export interface NotificationRepository {
  /** Stores the channel, unless its user has `maxPerUser` channels already (then undefined, nothing stored). */
  createChannel(
    channel: Omit<NotificationChannel, 'created_at'>,
    maxPerUser: number,
  ): Promise<NotificationChannel | undefined>;
  listChannels(userId: number): Promise<NotificationChannel[]>;
  getChannel(id: string): Promise<NotificationChannel | undefined>;
  /** Deletes the user's channel; false when the user has no such channel. */
  deleteChannel(userId: number, id: string): Promise<boolean>;
  /** Records the notifications an event causes and their `notification.requested` events, once per cause. */
  recordRequests(causeEventId: string, events: EventsFor<string>): Promise<void>;
  wasDelivered(notificationId: string): Promise<boolean>;
  markDelivered(notificationId: string, channelId: string): Promise<void>;
}
