import {
  type Attributes,
  type Context,
  context,
  INVALID_SPAN_CONTEXT,
  isSpanContextValid,
  propagation,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
} from '@opentelemetry/api';
import {
  ATTR_MESSAGING_CONSUMER_GROUP_NAME,
  ATTR_MESSAGING_DESTINATION_NAME,
  ATTR_MESSAGING_DESTINATION_PARTITION_ID,
  ATTR_MESSAGING_MESSAGE_ID,
  ATTR_MESSAGING_OPERATION_NAME,
  ATTR_MESSAGING_OPERATION_TYPE,
  ATTR_MESSAGING_SYSTEM,
  MESSAGING_OPERATION_TYPE_VALUE_PROCESS,
  MESSAGING_OPERATION_TYPE_VALUE_SEND,
} from '@opentelemetry/semantic-conventions/incubating';
import type { MessageHeaders } from '../../domain/events.js';
import type { BusMessage } from '../../ports/event-bus.js';
import { incomingContext, tracing } from './context-propagation.js';

/**
 * Trace context over message headers (spec §6.1, §6.2 rules 3–6): the publisher injects the
 * current context, a consumer extracts it and works inside a consumer span that is its child.
 * Spans follow the OpenTelemetry messaging conventions: `publish <topic>` (producer, operation
 * type `send`) and `process <topic>` (consumer), with `messaging.system`, `messaging.operation.*`,
 * `messaging.destination.*`, `messaging.message.id` (the event id) and
 * `messaging.consumer.group.name`; where the spec names a span (`dlq.consume`) its name wins.
 * With tracing off no span is made (this runs for every event), but a context that came in still
 * goes on in the headers (see `propagateWithoutTracing`).
 */
const tracer = trace.getTracer('urlshortener.events');
const NO_SPAN = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

/**
 * Whether `ctx` carries a trace its sampler dropped: the service's sampler is parent-based
 * (samplers.ts), so every span started under it would be dropped too, and making one (a span
 * id, attributes, the sampler asked, a context) is work for nothing. Such a message or event
 * carries the parent's context on as it is, flags 00: the "drop" still reaches what follows.
 */
function dropped(ctx: Context): boolean {
  const parent = trace.getSpanContext(ctx);
  return parent !== undefined && isSpanContextValid(parent) && (parent.traceFlags & TraceFlags.SAMPLED) === 0;
}

/** Attributes of message spans that the conventions do not name (spec §6.2 rule 4: event id and type, offset). */
export const MESSAGE_SPAN_ATTRIBUTES = {
  eventId: 'event.id',
  eventType: 'event.type',
  /** The message's position in its partition: the conventions name none outside Kafka's. */
  offset: 'urlshortener.message.offset',
} as const;

export const PUBLISH_OPERATION = 'publish';
export const PROCESS_OPERATION = 'process';

/** What a producer span describes: one message about to be published. */
export interface PublishedMessage {
  readonly topic: string;
  readonly eventId: string;
  readonly eventType: string;
}

function producerAttributes(message: PublishedMessage, system: string): Attributes {
  return {
    [ATTR_MESSAGING_SYSTEM]: system,
    [ATTR_MESSAGING_OPERATION_NAME]: PUBLISH_OPERATION,
    [ATTR_MESSAGING_OPERATION_TYPE]: MESSAGING_OPERATION_TYPE_VALUE_SEND,
    [ATTR_MESSAGING_DESTINATION_NAME]: message.topic,
    [ATTR_MESSAGING_MESSAGE_ID]: message.eventId,
    [MESSAGE_SPAN_ATTRIBUTES.eventId]: message.eventId,
    [MESSAGE_SPAN_ATTRIBUTES.eventType]: message.eventType,
  };
}

/**
 * Starts and ends a producer span under the active context, for a message recorded now and
 * sent later (the outbox); returns the message headers carrying the span.
 */
export function producerHeaders(message: PublishedMessage, service: string, system: string): MessageHeaders {
  if (!tracing() || dropped(context.active())) return injectedHeaders(message.eventType, service);
  const span = tracer.startSpan(`${PUBLISH_OPERATION} ${message.topic}`, {
    kind: SpanKind.PRODUCER,
    attributes: producerAttributes(message, system),
  });
  const headers = context.with(trace.setSpan(context.active(), span), () =>
    injectedHeaders(message.eventType, service),
  );
  span.end();
  return headers;
}

/**
 * Publishes a message inside a producer span (a direct publication: the dead-letter queue, a
 * re-publication): `publish` gets the headers carrying the span, which ends when it settles.
 */
export function inProducerSpan<T>(
  message: PublishedMessage,
  service: string,
  system: string,
  publish: (headers: MessageHeaders) => Promise<T>,
): Promise<T> {
  if (!tracing()) return publish(injectedHeaders(message.eventType, service));
  const name = `${PUBLISH_OPERATION} ${message.topic}`;
  const options = { kind: SpanKind.PRODUCER, attributes: producerAttributes(message, system) };
  return tracer.startActiveSpan(name, options, (span) =>
    settle(span, () => publish(injectedHeaders(message.eventType, service))),
  );
}

/**
 * The headers of spec §6.1 with the active context injected: `traceparent`, and `tracestate` when
 * the trace has vendor state. With no context at all (tracing off and none came in) there is no
 * trace to carry and both are left out: W3C trace context has no empty `traceparent`, and a
 * made-up one would make every consumer install propagation for nothing.
 */
export function injectedHeaders(eventType: string, service: string): MessageHeaders {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  const headers: Record<string, string> = { event_type: eventType, service };
  if (carrier.traceparent) headers.traceparent = carrier.traceparent;
  if (carrier.tracestate) headers.tracestate = carrier.tracestate;
  return headers;
}

/** The context a message's headers carry (the root context when they carry none). */
export function extractedContext(headers: MessageHeaders) {
  return incomingContext(headers);
}

/** Runs `work` in a consumer span that continues the trace the message carries. */
export function inMessageSpan<T>(
  name: string | undefined,
  message: BusMessage,
  system: string,
  group: string,
  work: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = extractedContext(message.headers);
  if (!tracing()) return context.with(parent, () => work(NO_SPAN));
  if (dropped(parent)) return context.with(parent, () => work(trace.getSpan(parent) ?? NO_SPAN));
  const attributes: Attributes = {
    [ATTR_MESSAGING_SYSTEM]: system,
    [ATTR_MESSAGING_OPERATION_NAME]: PROCESS_OPERATION,
    [ATTR_MESSAGING_OPERATION_TYPE]: MESSAGING_OPERATION_TYPE_VALUE_PROCESS,
    [ATTR_MESSAGING_DESTINATION_NAME]: message.topic,
    [ATTR_MESSAGING_DESTINATION_PARTITION_ID]: String(message.partition),
    [ATTR_MESSAGING_CONSUMER_GROUP_NAME]: group,
    [ATTR_MESSAGING_MESSAGE_ID]: message.envelope.event_id,
    [MESSAGE_SPAN_ATTRIBUTES.offset]: message.offset,
    [MESSAGE_SPAN_ATTRIBUTES.eventId]: message.envelope.event_id,
    [MESSAGE_SPAN_ATTRIBUTES.eventType]: message.envelope.event_type,
  };
  return tracer.startActiveSpan(
    name ?? `${PROCESS_OPERATION} ${message.topic}`,
    { kind: SpanKind.CONSUMER, attributes },
    parent,
    (span) => settle(span, () => work(span)),
  );
}

/** Awaits `work`, records its failure on `span`, and ends the span either way. */
export async function settle<T>(span: Span, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    span.recordException(error as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
    throw error;
  } finally {
    span.end();
  }
}
