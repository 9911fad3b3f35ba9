import type { NotificationChannel, NotificationRequested } from '../domain/notification.js';

/**
 * Delivers one notification to one channel, in the channel's own format (a signed webhook, a chat
 * message). Resolves once the receiver accepted it; rejects otherwise, and the caller retries.
 * Every adapter passes `test/contract/notification-sender.contract.test.ts`.
 *
 * @example
 *   await sender.send(channel, request); // then record it as delivered
 */
export interface NotificationSender {
  send(channel: NotificationChannel, notification: NotificationRequested): Promise<void>;
}
