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
  return propagation.extract(ROOT_CONTEXT, carrier);
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
