/**
 * Spec §6.2 rule 8: notification sending adds the notification id and the channel to its span,
 * recorded here with an in-memory exporter. Tracing is process-wide, so it starts first and this
 * file runs in a process of its own. The sender's span continues the trace of `POST /execute`.
 */
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind } from '@opentelemetry/api';
import { startTracing } from '../../src/adapters/telemetry/tracing.js';
import { testConfig } from '../helpers/backends.js';

const exporter = new InMemorySpanExporter();
const TRACING_ENV = { TRACING_SAMPLING_RATE: '1' };
const tracing = startTracing(testConfig('sqlite::memory:', TRACING_ENV).tracing, { exporter });

import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compose, type Service } from '../../src/composition/compose.js';
import { sqlite, type TestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { jsonPost, signUp } from '../helpers/auth.js';
import { Receiver } from './receiver.js';

const ENV = {
  ...TRACING_ENV,
  NODE_ENV: 'test',
  BCRYPT_ROUNDS: '4',
  NOTIFICATIONS_ALLOW_PRIVATE: 'true',
  EVENT_POLL_MS: '50',
  EVENT_LEASE_MS: '2000',
};

const spans = () => exporter.getFinishedSpans();

describe('notification spans', () => {
  const receiver = new Receiver();
  let database: TestDatabase;
  let service: Service;
  let base: string;

  beforeAll(async () => {
    await receiver.listen();
    database = await sqlite.create();
    service = await compose(testConfig(database.databaseUrl, ENV), { logger: false });
    await service.app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(service.app.server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await service?.close();
    await receiver.close();
    await database?.drop();
    await tracing.shutdown();
  });

  it('the sender span carries notification.id and the channel, in the trace of POST /execute', async () => {
    const { session } = await signUp(service.app, 'nsp');
    for (const [type, path] of [
      ['webhook', '/span-webhook'],
      ['chat', '/span-chat'],
    ] as const) {
      const created = await service.app.inject({
        method: 'POST',
        url: '/api/v1/notifications/channels',
        headers: { ...session.headers, 'content-type': 'application/json' },
        payload: JSON.stringify({ type, name: type, url: `${receiver.url}${path}` }),
      });
      expect(created.statusCode, created.body).toBe(201);
    }
    expect((await jsonPost(service.app, '/execute', { language: 'javascript', script: '1' }, {})).statusCode).toBe(401);

    // Over real HTTP, so the request has its server span.
    const response = await fetch(`${base}/execute`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie: session.cookie },
      body: JSON.stringify({ language: 'javascript', script: 'console.log("traced"); 7' }),
    });
    expect(response.status, await response.clone().text()).toBe(202);
    const { execution_id: executionId } = (await response.json()) as { execution_id: string };

    await eventually(() => receiver.to('/span-webhook').length === 1 && receiver.to('/span-chat').length === 1);
    const notificationId = receiver.to('/span-webhook')[0]!.headers['webhook-id'];
    expect(notificationId).toEqual(expect.any(String));

    const sender = (channel: string): Promise<ReadableSpan> =>
      eventually(() => {
        const span = spans().find(
          (s) =>
            s.attributes['messaging.consumer.group.name'] === 'notification-sender' &&
            s.attributes['notification.channel'] === channel,
        );
        if (!span) throw new Error(`no ${channel} sender span yet`);
        return span;
      });
    const webhookSpan = await sender('webhook');
    const chatSpan = await sender('chat');
    expect(webhookSpan.kind).toBe(SpanKind.CONSUMER);
    expect(webhookSpan.attributes).toMatchObject({
      'notification.id': notificationId,
      'notification.channel': 'webhook',
      'execution.id': executionId,
      'event.type': 'notification.requested',
    });
    expect(chatSpan.attributes).toMatchObject({
      'notification.id': expect.any(String),
      'notification.channel': 'chat',
      'execution.id': executionId,
    });
    expect(chatSpan.attributes['notification.id']).not.toBe(notificationId);

    // One trace: the request, the executor, the notification.
    const request = spans().find(
      // The accepted one: the refused POST /execute above has a server span of its own (401).
      (s) =>
        s.kind === SpanKind.SERVER &&
        s.attributes['http.route'] === '/execute' &&
        s.name === 'POST /execute' &&
        s.attributes['http.response.status_code'] === 202,
    );
    const refused = spans().find(
      (s) => s.name === 'POST /execute' && s.attributes['http.response.status_code'] === 401,
    );
    expect(refused?.kind).toBe(SpanKind.SERVER);
    expect(
      request,
      spans()
        .map((s) => s.name)
        .join(', '),
    ).toBeDefined();
    const traceId = request!.spanContext().traceId;
    const executor = spans().find(
      (s) =>
        s.attributes['messaging.consumer.group.name'] === 'executor' && s.attributes['execution.id'] === executionId,
    );
    expect(executor).toBeDefined();
    expect(executor!.spanContext().traceId).toBe(traceId);
    expect(webhookSpan.spanContext().traceId).toBe(traceId);
    expect(chatSpan.spanContext().traceId).toBe(traceId);

    // The outgoing POST is a client span below the sender's span.
    const client = await eventually(() => {
      const span = spans().find(
        (s) => s.kind === SpanKind.CLIENT && s.parentSpanContext?.spanId === webhookSpan.spanContext().spanId,
      );
      if (!span) throw new Error('no client span under the webhook sender span');
      return span;
    });
    expect(client.spanContext().traceId).toBe(traceId);
  });
});
