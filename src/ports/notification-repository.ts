import type { EventsFor } from '../domain/events.js';
import type { ChannelType, NotificationChannel } from '../domain/notification.js';

/** Notification channels and the record of what was delivered. */
export interface NotificationRepository {
  createChannel(channel: {
    id: string;
    user_id: number;
    type: ChannelType;
    name: string;
    url: string;
    secret: string | null;
  }): Promise<NotificationChannel>;
  listChannels(userId: number): Promise<NotificationChannel[]>;
  getChannel(id: string): Promise<NotificationChannel | undefined>;
  /** Deletes the user's channel; false when the user has no such channel. */
  deleteChannel(userId: number, id: string): Promise<boolean>;
  /** Records the notifications an event causes and their `notification.requested` events, once per cause. */
  recordRequests(causeEventId: string, events: EventsFor<string>): Promise<void>;
  wasDelivered(notificationId: string): Promise<boolean>;
  markDelivered(notificationId: string, channelId: string): Promise<void>;
}
