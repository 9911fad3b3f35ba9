/**
 * Notifications delivered to a real HTTP receiver on 127.0.0.1 (private destinations allowed in
 * this configuration), by the whole service in one process: a webhook arrives once, signed per
 * Standard Webhooks; a chat message arrives; a receiver failing three times still gets it; one
 * failing for ever (or redirecting, or never answering) ends in the dead-letter queue; with the
 * guard on, a channel created while private destinations were allowed is refused at send time.
 */
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../../src/adapters/storage/database.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminEnv, type TestApp, useTestApp, useTestApps } from '../helpers/app.js';
import { jsonPost, login, type Session, signUp } from '../helpers/auth.js';
import { BACKENDS, sqlite, useTestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { Receiver, verifyStandardWebhook } from './receiver.js';

const ADMIN = { username: 'notify_admin', email: 'notify_admin@example.com', password: 'admin password 1' };
const ATTEMPTS = 4;
const TIMEOUT_MS = 400;
const ENV = {
  NOTIFICATIONS_ALLOW_PRIVATE: 'true',
  NOTIFICATION_TIMEOUT_MS: String(TIMEOUT_MS),
  EVENT_POLL_MS: '50',
  EVENT_LEASE_MS: '2000',
  EVENT_HANDLER_ATTEMPTS: String(ATTEMPTS),
  EVENT_RETRY_BACKOFF_MS: '20',
  EVENT_RETRY_MAX_BACKOFF_MS: '100',
  DLQ_MAX_RETRIES: '0',
  DLQ_RETRY_DELAY_MS: '0',
  ...adminEnv(ADMIN),
};

interface Channel {
  id: string;
  secret?: string;
}
interface DeadLetterBody {
  id: number;
  event_type: string;
  topic: string;
  group: string;
  status: string;
  attempts: number;
  error: string;
  envelope: { event_id: string; payload: { notification_id: string; channel_id: string; execution_id: string } };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function addChannel(
  app: FastifyInstance,
  session: Session,
  type: 'webhook' | 'chat',
  url: string,
): Promise<Channel> {
  const response = await app.inject({
    method: 'POST',
    url: '/api/v1/notifications/channels',
    headers: { ...session.headers, 'content-type': 'application/json' },
    payload: JSON.stringify({ type, name: `${type} receiver`, url }),
  });
  expect(response.statusCode, response.body).toBe(201);
  return response.json<Channel>();
}

async function execute(app: FastifyInstance, session: Session, script: string): Promise<string> {
  const response = await jsonPost(app, '/execute', { language: 'javascript', script }, { cookie: session.cookie });
  expect(response.statusCode, response.body).toBe(202);
  return response.json<{ execution_id: string }>().execution_id;
}

async function parkedFor(app: FastifyInstance, admin: Session, channelId: string): Promise<DeadLetterBody[]> {
  const response = await app.inject({
    method: 'GET',
    url: '/api/v1/admin/dlq?status=parked&limit=500',
    headers: { cookie: admin.cookie },
  });
  expect(response.statusCode, response.body).toBe(200);
  return response.json<DeadLetterBody[]>().filter((d) => d.envelope.payload.channel_id === channelId);
}

/** The notification ids recorded as delivered to a channel. */
async function deliveries(database: Database, channelId: string): Promise<string[]> {
  const tables = database.db as unknown as Kysely<{
    notification_deliveries: { notification_id: string; channel_id: string };
  }>;
  const rows = await tables
    .selectFrom('notification_deliveries')
    .select('notification_id')
    .where('channel_id', '=', channelId)
    .execute();
  return rows.map((r) => r.notification_id);
}

describe.each(BACKENDS)('notification delivery on $name', (backend) => {
  const receiver = new Receiver();
  beforeAll(async () => {
    if (backend.available) await receiver.listen();
  });
  afterAll(async () => {
    if (backend.available) await receiver.close();
  });
  const t = useTestApp(backend, ENV, { accounts: true, admin: ADMIN });
  const admin = t.admin;

  it.skipIf(!backend.available)('the webhook arrives once, with a signature that verifies', async () => {
    const { session, user } = await signUp(t.app, 'nwh');
    const channel = await addChannel(t.app, session, 'webhook', `${receiver.url}/webhook-once`);
    const executionId = await execute(t.app, session, 'console.log("hi"); 6 * 7');

    const [request] = await eventually(() => {
      const got = receiver.to('/webhook-once');
      if (got.length === 0) throw new Error('no webhook yet');
      return got;
    });
    expect(request!.method).toBe('POST');
    expect(request!.headers['content-type']).toMatch(/^application\/json/);
    expect(verifyStandardWebhook(channel.secret!, request!.headers, request!.body)).toBe(true);
    // Any other secret, or a changed body, does not verify.
    expect(verifyStandardWebhook(`whsec_${Buffer.alloc(24).toString('base64')}`, request!.headers, request!.body)).toBe(
      false,
    );
    expect(verifyStandardWebhook(channel.secret!, request!.headers, request!.body.replace('42', '43'))).toBe(false);

    const timestamp = Number(request!.headers['webhook-timestamp']);
    expect(Number.isInteger(timestamp)).toBe(true);
    expect(Math.abs(timestamp - Date.now() / 1000)).toBeLessThan(300);

    const body = JSON.parse(request!.body) as { type: string; timestamp: string; data: Record<string, unknown> };
    expect(body).toMatchObject({
      type: 'execution.completed',
      timestamp: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
      data: {
        execution_id: executionId,
        user_id: user.id,
        status: 'completed',
        output: 'hi\n',
        result: 42,
        error: null,
      },
    });

    // webhook-id is the notification id, recorded as delivered once.
    await eventually(async () =>
      expect(await deliveries(t.service.database, channel.id)).toEqual([request!.headers['webhook-id']]),
    );
    expect(request!.headers['webhook-id']).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );

    // Once: nothing more arrives.
    await sleep(1000);
    expect(receiver.to('/webhook-once')).toHaveLength(1);
  });

  it.skipIf(!backend.available)('a chat message arrives, saying what happened', async () => {
    const { session } = await signUp(t.app, 'nch');
    await addChannel(t.app, session, 'chat', `${receiver.url}/chat`);
    const okId = await execute(t.app, session, '1 + 1');
    const failedId = await execute(t.app, session, 'throw new RangeError("out of range")');

    const messages = await eventually(() => {
      const got = receiver.to('/chat');
      if (got.length < 2) throw new Error(`${got.length} chat messages so far`);
      return got;
    });
    const texts = messages.map((m) => {
      expect(m.headers['content-type']).toMatch(/^application\/json/);
      expect(m.headers['webhook-signature']).toBeUndefined();
      const body = JSON.parse(m.body) as Record<string, unknown>;
      expect(Object.keys(body)).toEqual(['text']);
      return body.text as string;
    });
    const ok = texts.find((text) => text.includes(okId));
    const failed = texts.find((text) => text.includes(failedId));
    expect(ok).toMatch(/completed/);
    expect(failed).toMatch(/failed/);
    expect(failed).toContain('RangeError: out of range');
  });

  it.skipIf(!backend.available)("every channel of the owner is notified, and no one else's", async () => {
    const { session } = await signUp(t.app, 'nmu');
    const other = await signUp(t.app, 'nmo');
    await addChannel(t.app, session, 'webhook', `${receiver.url}/many-a`);
    await addChannel(t.app, session, 'chat', `${receiver.url}/many-b`);
    await addChannel(t.app, other.session, 'webhook', `${receiver.url}/many-other`);
    const id = await execute(t.app, session, '"x"');
    await eventually(() => receiver.to('/many-a').length === 1 && receiver.to('/many-b').length === 1);
    expect(receiver.to('/many-a')[0]!.body).toContain(id);
    await sleep(300);
    expect(receiver.to('/many-other')).toHaveLength(0);
  });

  it.skipIf(!backend.available)('a receiver failing three times still gets the message (retries)', async () => {
    const { session } = await signUp(t.app, 'nre');
    receiver.on('/flaky', (n) => (n <= 3 ? { status: n === 2 ? 503 : 500 } : { status: 200 }));
    const channel = await addChannel(t.app, session, 'webhook', `${receiver.url}/flaky`);
    await execute(t.app, session, '"retry me"');

    await eventually(async () => expect(await deliveries(t.service.database, channel.id)).toHaveLength(1));
    const attempts = receiver.to('/flaky');
    expect(attempts).toHaveLength(4);
    // The same notification each time, each signed.
    expect(new Set(attempts.map((a) => a.headers['webhook-id'])).size).toBe(1);
    for (const attempt of attempts)
      expect(verifyStandardWebhook(channel.secret!, attempt.headers, attempt.body)).toBe(true);
    expect(await deliveries(t.service.database, channel.id)).toEqual([attempts[0]!.headers['webhook-id']]);
    expect(await parkedFor(t.app, admin, channel.id)).toEqual([]);
    await sleep(500);
    expect(receiver.to('/flaky')).toHaveLength(4);
  });

  it.skipIf(!backend.available)('a receiver failing for ever: the message ends in the dead-letter queue', async () => {
    const { session } = await signUp(t.app, 'ndl');
    receiver.on('/down', () => ({ status: 500 }));
    const channel = await addChannel(t.app, session, 'webhook', `${receiver.url}/down`);
    const executionId = await execute(t.app, session, '"never delivered"');

    const [letter] = await eventually(async () => {
      const parked = await parkedFor(t.app, admin, channel.id);
      if (parked.length === 0) throw new Error('not dead-lettered yet');
      return parked;
    });
    expect(letter).toMatchObject({
      event_type: 'notification.requested',
      topic: expect.stringContaining('notification_events'),
      group: 'notification-sender',
      status: 'parked',
      attempts: ATTEMPTS,
      error: expect.stringContaining('Receiver answered 500'),
      envelope: { payload: { channel_id: channel.id, execution_id: executionId } },
    });
    expect(receiver.to('/down')).toHaveLength(ATTEMPTS);
    expect(letter!.envelope.payload.notification_id).toBe(receiver.to('/down')[0]!.headers['webhook-id']);
    expect(await deliveries(t.service.database, channel.id)).toEqual([]);
    await sleep(500);
    expect(receiver.to('/down')).toHaveLength(ATTEMPTS);
  });

  it.skipIf(!backend.available)('no redirects are followed: a receiver answering 302 counts as a failure', async () => {
    const { session } = await signUp(t.app, 'nrd');
    receiver.on('/moved', () => ({ status: 302, location: `${receiver.url}/landing` }));
    const channel = await addChannel(t.app, session, 'webhook', `${receiver.url}/moved`);
    await execute(t.app, session, '"redirected"');

    const [letter] = await eventually(async () => {
      const parked = await parkedFor(t.app, admin, channel.id);
      if (parked.length === 0) throw new Error('not dead-lettered yet');
      return parked;
    });
    expect(letter!.error).toContain('Receiver answered 302');
    expect(receiver.to('/moved')).toHaveLength(ATTEMPTS);
    expect(receiver.to('/landing')).toHaveLength(0);
    expect(await deliveries(t.service.database, channel.id)).toEqual([]);
  });

  it.skipIf(!backend.available)(
    'a receiver that does not answer within NOTIFICATION_TIMEOUT_MS is retried',
    async () => {
      const { session } = await signUp(t.app, 'nto');
      receiver.on('/slow', (n) => (n === 1 ? 'hang' : { status: 204 }));
      const channel = await addChannel(t.app, session, 'webhook', `${receiver.url}/slow`);
      await execute(t.app, session, '"slow receiver"');

      await eventually(async () => expect(await deliveries(t.service.database, channel.id)).toHaveLength(1));
      const [first, second] = receiver.to('/slow');
      expect(second).toBeDefined();
      expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
      // The sender gave up on the first request (closed it) rather than waiting for ever.
      await first!.closed;
      expect(second!.at - first!.at).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
      expect(receiver.to('/slow')).toHaveLength(2);
    },
  );

  it.skipIf(!backend.available)('a channel deleted before the execution ends gets nothing', async () => {
    const { session } = await signUp(t.app, 'ndd');
    const kept = await addChannel(t.app, session, 'chat', `${receiver.url}/kept`);
    const dropped = await addChannel(t.app, session, 'chat', `${receiver.url}/dropped`);
    const removed = await t.app.inject({
      method: 'DELETE',
      url: `/api/v1/notifications/channels/${dropped.id}`,
      headers: session.headers,
    });
    expect(removed.statusCode).toBe(204);
    await execute(t.app, session, '"after delete"');
    await eventually(async () => expect(await deliveries(t.service.database, kept.id)).toHaveLength(1));
    await sleep(300);
    expect(receiver.to('/dropped')).toHaveLength(0);
  });
});

/**
 * A channel created while private destinations were allowed, sent by a service with the guard on:
 * the address actually dialled is checked at connect time, so nothing reaches the receiver.
 */
describe('the connect-time guard', () => {
  const receiver = new Receiver();
  beforeAll(() => receiver.listen());
  afterAll(() => receiver.close());
  const database = useTestDatabase(sqlite);
  const start = useTestApps();
  let guarded: TestApp | undefined;

  it('refuses to send to a private address when the channel was created with allowPrivate but sending has the guard on', async () => {
    const user = { username: 'guard_user', email: 'guard_user@example.com', password: 'correct horse battery' };
    const channels: Channel[] = [];
    const open = await start(sqlite, ENV, { accounts: true, database });
    try {
      const response = await jsonPost(open.app, '/api/v1/auth/register', user);
      expect(response.statusCode, response.body).toBe(201);
      const session = await login(open.app, user.username, user.password);
      // A host name (checked by the lookup) and address literals (dialled without one).
      channels.push(await addChannel(open.app, session, 'webhook', `http://localhost:${receiver.port}/by-name`));
      channels.push(await addChannel(open.app, session, 'chat', `http://127.0.0.1:${receiver.port}/by-ipv4`));
      channels.push(
        await addChannel(open.app, session, 'chat', `http://[::ffff:127.0.0.1]:${receiver.port}/by-mapped`),
      );
      // IPv6 transition forms of 127.0.0.1 (IPv4-compatible, 6to4, NAT64): refused as literals too.
      for (const host of ['[::127.0.0.1]', '[2002:7f00:1::]', '[64:ff9b::7f00:1]']) {
        channels.push(await addChannel(open.app, session, 'chat', `http://${host}:${receiver.port}/by-transition`));
      }
    } finally {
      await open.close();
    }

    guarded = await start(sqlite, { ...ENV, NOTIFICATIONS_ALLOW_PRIVATE: 'false' }, { accounts: true, database });
    const session = await login(guarded.app, user.username, user.password);
    const admin = await login(guarded.app, ADMIN.username, ADMIN.password);
    await execute(guarded.app, session, '"guarded"');

    for (const channel of channels) {
      const [letter] = await eventually(async () => {
        const parked = await parkedFor(guarded!.app, admin, channel.id);
        if (parked.length === 0) throw new Error(`channel ${channel.id} not dead-lettered yet`);
        return parked;
      });
      expect(letter!.error).toMatch(/ForbiddenDestinationError: Destination not allowed/);
    }
    expect(receiver.requests).toEqual([]);
  });
});
