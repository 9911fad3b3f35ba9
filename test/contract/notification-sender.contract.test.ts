import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countedNotificationSender } from '../../src/adapters/notifications/counted-notification-sender.js';
import { HttpNotificationSender } from '../../src/adapters/notifications/http-notification-sender.js';
import { uuidv7 } from '../../src/domain/events.js';
import {
  type ChannelType,
  newWebhookSecret,
  type NotificationChannel,
  type NotificationRequested,
} from '../../src/domain/notification.js';
import type { NotificationSender } from '../../src/ports/notification-sender.js';
import { Receiver, verifyStandardWebhook } from '../notifications/receiver.js';
import { seriesValue } from '../helpers/prometheus.js';

const TIMEOUT_MS = 300;
const http = () => new HttpNotificationSender({ timeoutMs: TIMEOUT_MS, allowPrivate: true });

/** One contract, every notification sender: HTTP, and HTTP counted at the port's boundary. */
describe.each([
  { name: 'http', path: '/http', make: http },
  { name: 'counted http', path: '/counted', make: () => countedNotificationSender(http(), new Registry()) },
])('NotificationSender on $name', ({ path: base, make }) => {
  const receiver = new Receiver();
  let sender: NotificationSender;
  let n = 0;
  const channel = (type: ChannelType, path: string): NotificationChannel => ({
    id: uuidv7(),
    user_id: 1,
    type,
    name: `${type} receiver`,
    url: `${receiver.url}${path}`,
    secret: type === 'webhook' ? newWebhookSecret() : null,
    created_at: '2024-05-06T07:08:09.123456Z',
  });
  const request = (to: NotificationChannel): NotificationRequested => ({
    notification_id: uuidv7(),
    channel_id: to.id,
    channel_type: to.type,
    user_id: 1,
    execution_id: `exec-${++n}`,
    cause: {
      event_id: uuidv7(),
      event_type: 'execution.completed',
      payload: { execution_id: `exec-${n}`, status: 'completed', duration_ms: 12, error: null, result: 42 },
    },
  });

  beforeAll(async () => {
    await receiver.listen();
    sender = make();
  });
  afterAll(() => receiver.close());

  it('posts a webhook signed with the channel secret, with the cause as its data', async () => {
    const to = channel('webhook', `${base}/webhook`);
    const sent = request(to);
    await sender.send(to, sent);
    const [got] = receiver.to(`${base}/webhook`);
    expect(got!.method).toBe('POST');
    expect(got!.headers['webhook-id']).toBe(sent.notification_id);
    expect(verifyStandardWebhook(to.secret!, got!.headers, got!.body)).toBe(true);
    expect(JSON.parse(got!.body)).toEqual({
      type: 'execution.completed',
      timestamp: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
      data: sent.cause.payload,
    });
  });

  it('posts a chat message that says how the execution ended', async () => {
    const to = channel('chat', `${base}/chat`);
    const sent = request(to);
    await sender.send(to, sent);
    const [got] = receiver.to(`${base}/chat`);
    expect(JSON.parse(got!.body)).toEqual({ text: `Execution ${sent.execution_id} completed in 12 ms` });
  });

  it('rejects when the receiver refuses, redirects or does not answer in time', async () => {
    receiver.on(`${base}/refuse`, () => ({ status: 500 }));
    receiver.on(`${base}/redirect`, () => ({ status: 302, location: '/elsewhere' }));
    receiver.on(`${base}/hang`, () => 'hang');
    for (const path of ['refuse', 'redirect', 'hang']) {
      const to = channel('chat', `${base}/${path}`);
      await expect(sender.send(to, request(to)), path).rejects.toThrow();
    }
    expect(receiver.to('/elsewhere')).toHaveLength(0);
  });
});

describe('countedNotificationSender', () => {
  it('counts each attempt of the sender it wraps by channel type and outcome, and passes failures on', async () => {
    const registry = new Registry();
    const failure = new Error('receiver answered 500');
    let fail = false;
    const counted = countedNotificationSender(
      { send: async () => (fail ? Promise.reject(failure) : undefined) },
      registry,
    );
    const to = { type: 'webhook' } as NotificationChannel;
    const sent = {} as NotificationRequested;
    await counted.send(to, sent);
    fail = true;
    await expect(counted.send(to, sent)).rejects.toBe(failure);
    await expect(counted.send({ ...to, type: 'chat' }, sent)).rejects.toBe(failure);
    const count = (channel: string, outcome: string) =>
      seriesValue(registry, 'notifications_total', { channel, outcome });
    expect(await count('webhook', 'delivered')).toBe(1);
    expect(await count('webhook', 'failed')).toBe(1);
    expect(await count('chat', 'failed')).toBe(1);
  });
});
