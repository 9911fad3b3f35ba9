/**
 * Trace propagation through the event backbone (spec §6.1, §6.2 rules 3–7; issue #5), recorded
 * with an in-memory span exporter, across the embedded bus and across NATS JetStream:
 * one POST /execute yields one trace in which the consumer spans are children of the request's
 * producer span; the headers on the wire carry event_type, service, traceparent, tracestate; a
 * consumer that publishes further events continues the trace; a failing handler leads to a
 * `dlq.consume` span in the same trace, and the retried message carries the context again.
 * Tracing is process-wide, so it starts here, first, and this file runs in a process of its own.
 */
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind } from '@opentelemetry/api';
import { startTracing } from '../../src/adapters/telemetry/tracing.js';
import { testConfig } from '../helpers/backends.js';

const exporter = new InMemorySpanExporter();
const TRACING_ENV = { TRACING_SAMPLING_RATE: '1' };
const tracing = startTracing(testConfig('sqlite::memory:', TRACING_ENV).tracing, { exporter });

import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { connect, type NatsConnection, type Subscription as NatsSubscription } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { TOPICS } from '../../src/domain/events.js';
import type { BusMessage } from '../../src/ports/event-bus.js';
import { useTestApp } from '../helpers/app.js';
import { jsonPost } from '../helpers/auth.js';
import { sqlite } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { useTestConsumer } from '../helpers/consumers.js';
import { NATS_URL, natsAvailable } from '../helpers/services.js';
import { uniqueNatsPrefix } from '../helpers/nats.js';

const natsUp = await natsAvailable();
const VARIANTS = [
  { name: 'the embedded bus', nats: false },
  { name: 'NATS JetStream', nats: true },
];
const FLAKY_GROUP = 'trace-flaky';

const spans = () => exporter.getFinishedSpans();
const spanId = (s: ReadableSpan) => s.spanContext().spanId;
const traceId = (s: ReadableSpan) => s.spanContext().traceId;
const parentId = (s: ReadableSpan) => s.parentSpanContext?.spanId;
const inTrace = (id: string) => spans().filter((s) => traceId(s) === id);
const traceparentOf = (s: ReadableSpan) => `00-${traceId(s)}-${spanId(s)}-01`;

/** The one finished span matching `match`, waiting for it. */
function oneSpan(description: string, match: (s: ReadableSpan) => boolean): Promise<ReadableSpan> {
  return eventually(() => {
    const found = spans().filter(match);
    if (found.length !== 1) throw new Error(`${found.length} spans for ${description}`);
    return found[0]!;
  });
}

/**
 * The producer span of the event's first publication. A re-publication from the dead-letter
 * manager has a producer span too, for the same event, started later.
 */
const producerOf = (eventType: string, executionId: string, eventIds: Map<string, string>) =>
  eventually(() => {
    const found = spans()
      .filter(
        (s) =>
          s.kind === SpanKind.PRODUCER &&
          s.attributes['event.type'] === eventType &&
          s.attributes['event.id'] === eventIds.get(`${executionId}/${eventType}`),
      )
      .sort((a, b) => (a.startTime[0] - b.startTime[0]) * 1e9 + (a.startTime[1] - b.startTime[1]));
    if (found.length === 0) throw new Error(`no producer span of ${eventType} yet`);
    return found[0]!;
  });

const consumerOf = (eventId: string, group: string) =>
  oneSpan(`${group} consumer of ${eventId}`, (s) => {
    return (
      s.kind === SpanKind.CONSUMER &&
      s.attributes['event.id'] === eventId &&
      s.attributes['messaging.consumer.group.name'] === group
    );
  });

afterAll(async () => {
  await tracing.shutdown();
});

describe.each(VARIANTS)('event traces across $name', (variant) => {
  const ok = !variant.nats || natsUp;
  const prefix = uniqueNatsPrefix('trc');
  const t = useTestApp(
    sqlite,
    {
      ...TRACING_ENV,
      EVENT_POLL_MS: '50',
      EVENT_LEASE_MS: '2000',
      EVENT_HANDLER_ATTEMPTS: '2',
      EVENT_RETRY_BACKOFF_MS: '20',
      EVENT_RETRY_MAX_BACKOFF_MS: '40',
      DLQ_MAX_RETRIES: '1',
      DLQ_RETRY_DELAY_MS: '20',
    },
    { accounts: true, natsPrefix: variant.nats ? prefix : undefined, when: ok },
  );
  const session = t.user('evtrace');
  let db: Kysely<EventTables>;
  let wire: NatsConnection | undefined;
  let wireSub: NatsSubscription | undefined;
  /** What the NATS wire carried: headers per event id. */
  const onTheWire = new Map<string, Record<string, string>>();
  /** The flaky group refuses execution.requested of scripts carrying this marker. */
  const FAIL_MARKER = '/* refuse me */';
  const flakyDeliveries: BusMessage[] = [];

  beforeAll(async () => {
    if (!ok) return;
    db = t.service.database.db as unknown as Kysely<EventTables>;
    if (variant.nats) {
      // A plain NATS subscriber sees the messages as JetStream stored them: headers and all.
      wire = await connect({ servers: NATS_URL.replace(/^nats:\/\//, '') });
      wireSub = wire.subscribe(`${prefix}${TOPICS.execution}.*`, {
        callback: (_error, message) => {
          const headers: Record<string, string> = {};
          for (const name of message.headers?.keys() ?? []) headers[name] = message.headers?.get(name) ?? '';
          const envelope = JSON.parse(new TextDecoder().decode(message.data)) as { event_id: string };
          onTheWire.set(envelope.event_id, headers);
        },
      });
      await wire.flush();
    }
  });
  afterAll(async () => {
    wireSub?.unsubscribe();
    await wire?.close();
  });
  useTestConsumer(
    t,
    { attempts: 2, backoffMs: 20, maxBackoffMs: 40 },
    {
      group: FLAKY_GROUP,
      topics: [TOPICS.execution],
      startAt: 'latest',
      handle: async (message) => {
        const payload = message.envelope.payload as { execution_id?: string; script?: string };
        if (message.envelope.event_type !== 'execution.requested' || !payload.script?.includes(FAIL_MARKER)) return;
        flakyDeliveries.push(message);
        throw new Error(`refusing ${payload.execution_id}`);
      },
    },
  );

  /** Dead letters as a consumer of the dead-letter queue receives them. */
  const deadLetterDeliveries: BusMessage[] = [];
  useTestConsumer(
    t,
    { attempts: 1, backoffMs: 20, maxBackoffMs: 40 },
    {
      group: 'trace-dlq-watch',
      topics: [TOPICS.deadLetter],
      startAt: 'latest',
      deadLetter: false,
      handle: async (message) => {
        deadLetterDeliveries.push(message);
      },
    },
  );

  /** The headers of the first dead letter of event `eventId`. */
  const deadLetterHeaders = (eventId: string) =>
    eventually(() => {
      const found = deadLetterDeliveries.find(
        (m) => (m.envelope.payload as { original: { event_id: string } }).original.event_id === eventId,
      );
      if (!found) throw new Error(`no dead letter of ${eventId} yet`);
      return found.headers;
    });

  /** `POST /execute`; the execution id. */
  async function execute(script: string, headers: Record<string, string> = {}): Promise<string> {
    const response = await jsonPost(
      t.app,
      '/execute',
      { language: 'javascript', script },
      { cookie: session.cookie, ...headers },
    );
    expect(response.statusCode, response.body).toBe(202);
    return response.json<{ execution_id: string }>().execution_id;
  }

  /** Event ids of an execution's events, keyed `execution/type`, once all of `types` are stored. */
  async function storedEvents(executionId: string, types: string[]) {
    return eventually(
      async () => {
        const rows = await db.selectFrom('event_store').selectAll().where('execution_id', '=', executionId).execute();
        expect(rows.map((r) => r.event_type).sort()).toEqual(expect.arrayContaining(types));
        return {
          ids: new Map(rows.map((r) => [`${executionId}/${r.event_type}`, r.event_id])),
          rows,
        };
      },
      { timeoutMs: 20_000 },
    );
  }

  /** The headers the bus itself holds for an event: the embedded log's row, or what the NATS wire carried. */
  async function wireHeaders(eventId: string): Promise<Record<string, string>> {
    if (variant.nats) {
      return eventually(() => {
        const headers = onTheWire.get(eventId);
        if (!headers) throw new Error(`message ${eventId} not seen on the wire yet`);
        return headers;
      });
    }
    const row = await db
      .selectFrom('event_log')
      .select('headers')
      .where('message_id', '=', eventId)
      .executeTakeFirstOrThrow();
    return JSON.parse(row.headers) as Record<string, string>;
  }

  it.skipIf(!ok)(
    "one POST /execute: the consumer spans are children of the request's producer span, headers on the wire",
    async () => {
      expect(t.service.events.bus.constructor.name).toBe(variant.nats ? 'NatsEventBus' : 'EmbeddedLogEventBus');
      const executionId = await execute('1 + 1');
      const { ids } = await storedEvents(executionId, ['execution.requested', 'execution.completed']);
      const requestedId = ids.get(`${executionId}/execution.requested`)!;

      const producer = await producerOf('execution.requested', executionId, ids);
      const server = await oneSpan('server span', (s) => spanId(s) === parentId(producer));
      expect(server.kind).toBe(SpanKind.SERVER);
      expect(server.name).toBe('POST /execute');
      expect(server.attributes).toMatchObject({ 'execution.language': 'javascript', 'execution.script.length': 5 });
      // OpenTelemetry messaging conventions: `<operation> <destination>`, the bus's system.
      const system = variant.nats ? 'nats' : 'urlshortener.embedded_log';
      expect(producer.name).toBe('publish execution_events');
      expect(producer.kind).toBe(SpanKind.PRODUCER);
      expect(producer.attributes).toMatchObject({
        'messaging.system': system,
        'messaging.operation.name': 'publish',
        'messaging.operation.type': 'send',
        'messaging.destination.name': 'execution_events',
        'messaging.message.id': requestedId,
        'event.type': 'execution.requested',
      });

      for (const group of ['executor', 'event-store']) {
        const consumer = await consumerOf(requestedId, group);
        expect(parentId(consumer), group).toBe(spanId(producer));
        expect(traceId(consumer)).toBe(traceId(server));
        expect(consumer.name).toBe('process execution_events');
        expect(consumer.attributes).toMatchObject({
          'event.id': requestedId,
          'event.type': 'execution.requested',
          'messaging.system': system,
          'messaging.operation.name': 'process',
          'messaging.operation.type': 'process',
          'messaging.consumer.group.name': group,
          'messaging.destination.name': 'execution_events',
          'messaging.destination.partition.id': expect.any(String),
          'messaging.message.id': requestedId,
          'urlshortener.message.offset': expect.any(Number),
        });
        expect(consumer.attributes).not.toHaveProperty('messaging.offset');
      }

      const headers = await wireHeaders(requestedId);
      // No tracestate came in, so none goes on (W3C: no empty header).
      for (const name of ['event_type', 'service', 'traceparent']) expect(headers).toHaveProperty(name);
      expect(headers).not.toHaveProperty('tracestate');
      expect(headers.event_type).toBe('execution.requested');
      expect(headers.service).toBe('urlshortener');
      expect(headers.traceparent).toBe(traceparentOf(producer));
    },
  );

  it.skipIf(!ok)('an incoming traceparent and tracestate travel on in the message headers', async () => {
    const incomingTrace = randomBytes(16).toString('hex');
    const incoming = `00-${incomingTrace}-${randomBytes(8).toString('hex')}-01`;
    const executionId = await execute('2 + 2', { traceparent: incoming, tracestate: 'vendor=abc,other=x1' });
    const { ids } = await storedEvents(executionId, ['execution.requested']);
    const producer = await producerOf('execution.requested', executionId, ids);
    expect(traceId(producer)).toBe(incomingTrace);
    const headers = await wireHeaders(ids.get(`${executionId}/execution.requested`)!);
    expect(headers.traceparent).toBe(traceparentOf(producer));
    expect(headers.tracestate).toBe('vendor=abc,other=x1');
  });

  it.skipIf(!ok)('a consumer that publishes further events continues the same trace', async () => {
    const executionId = await execute('console.log("x"); 3');
    const { ids } = await storedEvents(executionId, [
      'execution.requested',
      'execution.started',
      'execution.completed',
    ]);
    const requested = await producerOf('execution.requested', executionId, ids);
    const executor = await consumerOf(ids.get(`${executionId}/execution.requested`)!, 'executor');
    expect(executor.attributes['execution.id']).toBe(executionId);

    for (const type of ['execution.started', 'execution.completed']) {
      const producer = await producerOf(type, executionId, ids);
      expect(traceId(producer), type).toBe(traceId(requested));
      expect(parentId(producer), type).toBe(spanId(executor)); // published from inside the executor's span
      const stored = await consumerOf(ids.get(`${executionId}/${type}`)!, 'event-store');
      expect(parentId(stored), type).toBe(spanId(producer));
      expect(traceId(stored)).toBe(traceId(requested));
      const headers = await wireHeaders(ids.get(`${executionId}/${type}`)!);
      expect(headers).toMatchObject({
        event_type: type,
        service: 'urlshortener',
        traceparent: traceparentOf(producer),
      });
    }
    // The whole chain is one trace, rooted at the request's server span.
    const all = inTrace(traceId(requested));
    const roots = all.filter((s) => !all.some((p) => spanId(p) === parentId(s)));
    expect(roots.map((s) => s.name)).toEqual(['POST /execute']);
  });

  it.skipIf(!ok)('event persistence adds event id, type, execution id and batch size to its span', async () => {
    const executionId = await execute('4');
    const { ids } = await storedEvents(executionId, ['execution.requested']);
    const eventId = ids.get(`${executionId}/execution.requested`)!;
    const span = await consumerOf(eventId, 'event-store');
    expect(span.attributes).toMatchObject({
      'event.id': eventId,
      'event.type': 'execution.requested',
      'execution.id': executionId,
    });
    expect(span.attributes['event_store.batch_size']).toEqual(expect.any(Number));
    expect(span.attributes['event_store.batch_size'] as number).toBeGreaterThanOrEqual(1);
  });

  it.skipIf(!ok)(
    'a failing handler: dlq.consume in the same trace, and the retried message carries the context again',
    async () => {
      const executionId = await execute(`${FAIL_MARKER} 5`);
      const { ids } = await storedEvents(executionId, ['execution.requested']);
      const requestedId = ids.get(`${executionId}/execution.requested`)!;
      const producer = await producerOf('execution.requested', executionId, ids);

      // DLQ_MAX_RETRIES=1: dead-lettered, retried once, dead-lettered again, parked.
      const statuses = await eventually(async () => {
        const rows = await db
          .selectFrom('dead_letters')
          .selectAll()
          .where('event_id', '=', requestedId)
          .orderBy('id')
          .execute();
        expect(rows.map((r) => r.status)).toEqual(['retried', 'parked']);
        return rows;
      });
      const dlqSpans = await eventually(() => {
        const found = spans().filter(
          (s) => s.name === 'dlq.consume' && s.attributes['dlq.original.event_id'] === requestedId,
        );
        expect(found).toHaveLength(2);
        return found.sort((a, b) => (a.startTime[0] - b.startTime[0]) * 1e9 + (a.startTime[1] - b.startTime[1]));
      });
      const [firstDlq, secondDlq] = dlqSpans as [ReadableSpan, ReadableSpan];
      // The dead letter is published from the failing consumer span, in a producer span of its
      // own: dlq.consume is that span's child, in the request's trace.
      const deadLetterProducers = await eventually(() => {
        const found = spans().filter((s) => s.kind === SpanKind.PRODUCER && s.name === 'publish dead_letter_queue');
        expect(found.filter((s) => traceId(s) === traceId(producer)).length).toBeGreaterThanOrEqual(2);
        return found;
      });
      const firstDeadLetter = deadLetterProducers.find((s) => spanId(s) === parentId(firstDlq))!;
      expect(firstDeadLetter, 'dlq.consume is a child of the dead-letter producer span').toBeDefined();
      expect(firstDeadLetter.attributes).toMatchObject({
        'messaging.operation.name': 'publish',
        'messaging.destination.name': 'dead_letter_queue',
        'event.type': 'dead_letter',
      });
      const failedConsumer = spans().find((s) => spanId(s) === parentId(firstDeadLetter))!;
      expect(failedConsumer.kind).toBe(SpanKind.CONSUMER);
      expect(failedConsumer.attributes['messaging.consumer.group.name']).toBe(FLAKY_GROUP);
      expect(parentId(failedConsumer)).toBe(spanId(producer));
      expect(traceId(firstDlq)).toBe(traceId(producer));
      expect(firstDlq.kind).toBe(SpanKind.CONSUMER);
      expect(firstDlq.attributes).toMatchObject({
        'dlq.original.topic': 'execution_events',
        'dlq.original.group': FLAKY_GROUP,
        'dlq.original.event_type': 'execution.requested',
        'dlq.decision': 'retry',
      });
      // The dead letter's own headers describe it (event_type = its envelope's); the letter
      // recorded for admins keeps the original message's headers, which its payload carried.
      const deadLetterMessage = await deadLetterHeaders(requestedId);
      expect(deadLetterMessage).toMatchObject({
        event_type: 'dead_letter',
        traceparent: traceparentOf(firstDeadLetter),
      });
      expect(JSON.parse(statuses[0]!.headers)).toMatchObject({ traceparent: traceparentOf(producer) });

      // The re-publication is a producer span, child of dlq.consume, and the retried message carries it.
      const republished = spans().find(
        (s) =>
          s.kind === SpanKind.PRODUCER && s.name === 'publish execution_events' && parentId(s) === spanId(firstDlq),
      )!;
      expect(republished, 'the re-publication has a producer span').toBeDefined();
      expect(flakyDeliveries.filter((m) => m.envelope.event_id === requestedId)).toHaveLength(4);
      const retried = flakyDeliveries.filter((m) => m.envelope.event_id === requestedId)[2]!;
      expect(retried.headers).toMatchObject({
        event_type: 'execution.requested',
        service: 'urlshortener',
        traceparent: traceparentOf(republished),
      });
      const flakySpans = await eventually(() => {
        const found = spans().filter(
          (s) =>
            s.attributes['event.id'] === requestedId && s.attributes['messaging.consumer.group.name'] === FLAKY_GROUP,
        );
        expect(found).toHaveLength(2);
        return found;
      });
      expect(flakySpans.map((s) => parentId(s)).sort()).toEqual([spanId(producer), spanId(republished)].sort());
      expect(flakySpans.every((s) => traceId(s) === traceId(producer))).toBe(true);
      // The second dead letter comes from the retried delivery: dlq.consume, its dead-letter
      // producer span, the retried delivery's consumer span, the re-publication, the first dlq.consume.
      expect(traceId(secondDlq)).toBe(traceId(producer));
      const ancestry = (span: ReadableSpan): string[] => {
        const parent = spans().find((s) => spanId(s) === parentId(span));
        return parent === undefined ? [] : [parent.name, ...ancestry(parent)];
      };
      expect(ancestry(secondDlq).slice(0, 4)).toEqual([
        'publish dead_letter_queue',
        'process execution_events',
        'publish execution_events',
        'dlq.consume',
      ]);
      expect(secondDlq.attributes['dlq.decision']).toBe('park');
    },
  );
});
