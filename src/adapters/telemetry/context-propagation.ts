import { type Context, context, propagation, ProxyTracerProvider, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { PromiseContextManager } from './promise-context-manager.js';

/** What the global provider delegates to while none is registered. */
const NO_PROVIDER = new ProxyTracerProvider().getDelegate();

/** Whether a tracer provider is registered (tracing on), so that spans are worth making. */
export function tracing(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegate() !== NO_PROVIDER;
}

let propagating = false;

/**
 * With tracing off (`OTEL_SDK_DISABLED=true`, sampling rate 0) nothing is recorded, but a trace
 * context that comes in (an HTTP `traceparent`, a message's headers) still goes on: the work runs
 * in the incoming context (a non-recording span) and what it publishes carries that context.
 * This installs what that takes — the W3C trace-context propagator and a context manager — the
 * first time such a context arrives, so a process that never sees one pays nothing for it.
 * Does nothing when tracing is on (the SDK installed both) or once done.
 */
export function propagateWithoutTracing(): void {
  if (propagating || tracing()) return;
  propagating = true;
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  context.setGlobalContextManager(new PromiseContextManager().enable());
}

/** Removes what `propagateWithoutTracing` installed, so that tracing can install its own. */
export function stopPropagationWithoutTracing(): void {
  if (!propagating) return;
  propagating = false;
  propagation.disable();
  context.disable();
}

/**
 * The context the W3C trace headers of `carrier` carry (an HTTP request's headers, a message's),
 * or the root context when they carry none. With tracing off, a carrier with a `traceparent`
 * installs propagation first (see `propagateWithoutTracing`).
 */
export function incomingContext(carrier: Readonly<Record<string, unknown>>): Context {
  const traceparent = carrier.traceparent;
  if (traceparent === undefined || traceparent === '') return ROOT_CONTEXT;
  propagateWithoutTracing();
  if (typeof traceparent === 'string' && carrier.tracestate === undefined && carrier.baggage === undefined) {
    const parsed = plainTraceparent(traceparent);
    if (parsed !== undefined && w3cPropagation()) return trace.setSpanContext(ROOT_CONTEXT, parsed);
  }
  return propagation.extract(ROOT_CONTEXT, carrier);
}

/** The header names of W3C trace context and baggage: the only ones a propagator here reads. */
const W3C_FIELDS: ReadonlySet<string> = new Set(['traceparent', 'tracestate', 'baggage']);

/** Whether the process's propagator reads W3C headers only (W3C trace context, baggage), as the service installs. */
function w3cPropagation(): boolean {
  return propagation.fields().every((field) => W3C_FIELDS.has(field));
}

const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_SPAN_ID = '0'.repeat(16);

/**
 * The span context of a version-00 `traceparent` in its one valid layout
 * (`00-<32 hex>-<16 hex>-<2 hex>`, lower case, ids not all zeros), as the W3C propagator would
 * extract it; undefined for anything else, which is then left to the propagator. Every event
 * a consumer takes carries one: the propagator's regular expressions cost about 3.7 µs a create
 * with tracing on (bench/PROFILE.md).
 */
export function plainTraceparent(
  value: string,
): { traceId: string; spanId: string; traceFlags: number; isRemote: true } | undefined {
  if (value.length !== 55 || !value.startsWith('00-') || value[35] !== '-' || value[52] !== '-') return undefined;
  for (let i = 3; i < 55; i++) {
    if (i === 35 || i === 52) continue;
    const c = value.charCodeAt(i);
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return undefined;
  }
  const traceId = value.slice(3, 35);
  const spanId = value.slice(36, 52);
  if (traceId === ZERO_TRACE_ID || spanId === ZERO_SPAN_ID) return undefined;
  return { traceId, spanId, traceFlags: parseInt(value.slice(53, 55), 16), isRemote: true };
}

/**
 * The W3C trace headers of an outgoing HTTP call made with tracing off: the context the work came
 * with (see `propagateWithoutTracing`), or none. With tracing on, the HTTP instrumentation puts in
 * its client span's instead, so this gives nothing.
 */
export function outgoingTraceHeaders(): Record<string, string> {
  if (!propagating || tracing()) return {};
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier;
}
