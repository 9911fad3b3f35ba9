/**
 * Tracing is process-wide: each adapter is checked first with nothing installed, then started
 * (once, for good) and checked again. This file runs in a process of its own.
 */
import { SpanKind, trace } from '@opentelemetry/api';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { beforeAll, describe, expect, it } from 'vitest';
import { otelMessageTracing } from '../../src/adapters/telemetry/otel-message-tracing.js';
import { startTracing } from '../../src/adapters/telemetry/tracing.js';
import type { MessageTracing } from '../../src/ports/message-tracing.js';
import { testConfig } from '../helpers/backends.js';

const exporter = new InMemorySpanExporter();
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/;

/** One contract, every way of carrying trace context over messages (OpenTelemetry is the one there is). */
describe.each([
  {
    name: 'opentelemetry',
    tracing: otelMessageTracing('nats') as MessageTracing,
    start: () => startTracing(testConfig('sqlite::memory:', { TRACING_SAMPLING_RATE: '1' }).tracing, { exporter }),
  },
])('MessageTracing on $name', ({ tracing, start }) => {
  /** The headers a message published inside a new span of the test would carry, and that span's ids. */
  const publishedInSpan = () =>
    trace.getTracer('contract').startActiveSpan('publisher', (span) => {
      const headers = tracing.headers('url.created', 'urlshortener');
      span.end();
      return { headers, traceId: span.spanContext().traceId, spanId: span.spanContext().spanId };
    });

  describe('with no tracer installed', () => {
    it('gives the headers without trace context when there is none (never empty trace headers)', () => {
      expect(publishedInSpan().headers).toEqual({ event_type: 'url.created', service: 'urlshortener' });
    });

    it('publishes with those headers and hands the result back', async () => {
      const message = { topic: 'url_events', eventId: 'e1', eventType: 'url.created' };
      expect(await tracing.publish(message, 'urlshortener', async (headers) => headers)).toEqual({
        event_type: 'url.created',
        service: 'urlshortener',
      });
    });

    it('runs the work and hands its result or its error back', async () => {
      const headers = publishedInSpan().headers;
      expect(await tracing.continueTrace('work', headers, async () => 42)).toBe(42);
      const failure = new Error('boom');
      await expect(tracing.continueTrace('work', headers, () => Promise.reject(failure))).rejects.toBe(failure);
      expect(await tracing.resume(headers, async () => 43)).toBe(43);
      await expect(tracing.resume(headers, () => Promise.reject(failure))).rejects.toBe(failure);
    });
  });

  describe('with tracing on', () => {
    beforeAll(() => {
      start();
    });

    it('puts the active span into the headers', () => {
      const { headers, traceId, spanId } = publishedInSpan();
      expect(headers).toMatchObject({ event_type: 'url.created', service: 'urlshortener' });
      expect(TRACEPARENT.exec(headers.traceparent!)?.slice(1)).toEqual([traceId, spanId]);
    });

    it('continues the trace the headers carry, in a span that ends with the work', async () => {
      const { headers, traceId, spanId } = publishedInSpan();
      const inside = await tracing.continueTrace('dlq.retry', headers, async () =>
        tracing.headers('url.created', 'urlshortener'),
      );
      const [span] = exporter.getFinishedSpans().filter((s) => s.name === 'dlq.retry');
      expect(span!.spanContext().traceId).toBe(traceId);
      expect(span!.parentSpanContext?.spanId).toBe(spanId);
      // What is published inside carries the new span.
      expect(TRACEPARENT.exec(inside.traceparent!)?.slice(1)).toEqual([traceId, span!.spanContext().spanId]);
    });

    it('publishes inside a producer span that the headers carry', async () => {
      const message = { topic: 'url_events', eventId: 'e2', eventType: 'url.created' };
      const { traceId, spanId } = publishedInSpan();
      const parent = { event_type: 'url.created', service: 'urlshortener', traceparent: `00-${traceId}-${spanId}-01` };
      const headers = await tracing.continueTrace('outer', parent, () =>
        tracing.publish(message, 'urlshortener', async (h) => h),
      );
      const [producer] = exporter.getFinishedSpans().filter((s) => s.attributes['messaging.message.id'] === 'e2');
      expect(producer!.name).toBe('publish url_events');
      expect(producer!.kind).toBe(SpanKind.PRODUCER);
      expect(producer!.attributes).toMatchObject({
        'messaging.system': 'nats',
        'messaging.operation.name': 'publish',
        'messaging.operation.type': 'send',
        'messaging.destination.name': 'url_events',
        'event.type': 'url.created',
      });
      expect(producer!.spanContext().traceId).toBe(traceId);
      expect(TRACEPARENT.exec(headers.traceparent!)?.slice(1)).toEqual([traceId, producer!.spanContext().spanId]);
    });

    it('resumes the context the headers carry with no span of its own: a publish inside is its child', async () => {
      const message = { topic: 'url_events', eventId: 'e3', eventType: 'url.created' };
      const { headers, traceId, spanId } = publishedInSpan(); // that span has ended long before
      const finished = exporter.getFinishedSpans().length;
      const published = await tracing.resume(headers, () => tracing.publish(message, 'urlshortener', async (h) => h));
      const added = exporter.getFinishedSpans().slice(finished);
      expect(added.map((s) => s.name)).toEqual(['publish url_events']);
      const [producer] = added;
      expect(producer!.spanContext().traceId).toBe(traceId);
      expect(producer!.parentSpanContext?.spanId).toBe(spanId);
      expect(TRACEPARENT.exec(published.traceparent!)?.slice(1)).toEqual([traceId, producer!.spanContext().spanId]);
    });

    it('ends the span also when the work fails, and passes the error on', async () => {
      const failure = new Error('boom');
      const { headers } = publishedInSpan();
      await expect(tracing.continueTrace('failing', headers, () => Promise.reject(failure))).rejects.toBe(failure);
      expect(exporter.getFinishedSpans().filter((s) => s.name === 'failing')).toHaveLength(1);
    });
  });
});
