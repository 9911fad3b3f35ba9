import {
  context,
  INVALID_SPAN_CONTEXT,
  propagation,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import type { MessageHeaders, OutgoingEvent } from '../../domain/events.js';
import type { BusMessage } from '../../ports/event-bus.js';

/**
 * Trace context over message headers (spec §6.1, §6.2 rules 3–6): the publisher injects the
 * current context, a consumer extracts it and works inside a consumer span that is its child.
 * With no tracer provider registered, spans are no-ops and the trace headers stay empty: then
 * none is made at all (this runs for every event, on the write path and in every consumer).
 */
const tracer = trace.getTracer('urlshortener.events');

/** What the global provider delegates to while none is registered. */
const NO_PROVIDER = new ProxyTracerProvider().getDelegate();
const NO_SPAN = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/** Whether a tracer provider is registered (tracing on), so that spans are worth making. */
function tracing(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegate() !== NO_PROVIDER;
}

export const MESSAGING_SYSTEM = 'urlshortener';

/** Starts and ends a producer span under the active context; returns the message headers carrying it. */
export function producerHeaders(event: OutgoingEvent, service: string): MessageHeaders {
  if (!tracing()) return { event_type: event.envelope.event_type, service, traceparent: '', tracestate: '' };
  return tracer.startActiveSpan(
    `${event.topic} publish`,
    {
      kind: SpanKind.PRODUCER,
      attributes: {
        'messaging.system': MESSAGING_SYSTEM,
        'messaging.operation.type': 'send',
        'messaging.destination.name': event.topic,
        'messaging.message.id': event.envelope.event_id,
        'event.id': event.envelope.event_id,
        'event.type': event.envelope.event_type,
      },
    },
    (span) => {
      const headers = injectedHeaders(event.envelope.event_type, service);
      span.end();
      return headers;
    },
  );
}

/** The four headers of spec §6.1 with the active context injected. */
export function injectedHeaders(eventType: string, service: string): MessageHeaders {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return {
    event_type: eventType,
    service,
    traceparent: carrier.traceparent ?? '',
    tracestate: carrier.tracestate ?? '',
  };
}

/** The context a message's headers carry (the root context when they carry none). */
export function extractedContext(headers: MessageHeaders) {
  return propagation.extract(ROOT_CONTEXT, headers);
}

/** Runs `work` in a span that continues the trace the message carries. */
export function inMessageSpan<T>(
  name: string,
  message: BusMessage,
  attributes: Record<string, string | number>,
  work: (span: Span) => Promise<T>,
): Promise<T> {
  if (!tracing()) return work(NO_SPAN);
  return tracer.startActiveSpan(
    name,
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        'messaging.system': MESSAGING_SYSTEM,
        'messaging.operation.type': 'process',
        'messaging.destination.name': message.topic,
        'messaging.destination.partition.id': String(message.partition),
        'messaging.message.id': message.envelope.event_id,
        'messaging.offset': message.offset,
        'event.id': message.envelope.event_id,
        'event.type': message.envelope.event_type,
        ...attributes,
      },
    },
    extractedContext(message.headers),
    async (span) => {
      try {
        return await work(span);
      } catch (error) {
        span.recordException(error as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
        throw error;
      } finally {
        span.end();
      }
    },
  );
}
