import { Counter, type Registry } from 'prom-client';
import type { NotificationChannel, NotificationRequested } from '../../domain/notification.js';
import type { NotificationSender } from '../../ports/notification-sender.js';

/**
 * Counts every delivery attempt of `sender` in `notifications_total{channel, outcome}` on
 * `registry`: metrics at the port's boundary, so the notifier itself knows nothing of them.
 */
export function countedNotificationSender(sender: NotificationSender, registry: Registry): NotificationSender {
  const sent = new Counter({
    name: 'notifications_total',
    help: 'Notification delivery attempts by channel type and outcome.',
    labelNames: ['channel', 'outcome'],
    registers: [registry],
  });
  return {
    async send(channel: NotificationChannel, request: NotificationRequested) {
      try {
        await sender.send(channel, request);
      } catch (error) {
        sent.inc({ channel: channel.type, outcome: 'failed' });
        throw error;
      }
      sent.inc({ channel: channel.type, outcome: 'delivered' });
    },
  };
}
