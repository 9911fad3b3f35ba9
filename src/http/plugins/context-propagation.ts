import { type Context, context } from '@opentelemetry/api';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { incomingContext } from '../../adapters/telemetry/context-propagation.js';
import { addRouteHook } from './route-hooks.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** With tracing off: the trace context the request came with, if any. */
    incomingTraceContext: Context | null;
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * With tracing off: a request that comes with a W3C `traceparent` runs in that context (a
 * non-recording span), so the events it publishes carry it on (spec §6.2 rules 3 and 5) instead
 * of losing it. Only on routes that change data: no read handler publishes or calls out on the
 * request's behalf (see `registerRequestTracing`), so the redirect path gains no hook. A request
 * without the header costs one property read.
 * Register only when tracing is off, before any route is registered.
 */
export function registerContextPropagation(app: FastifyInstance): void {
  app.decorateRequest('incomingTraceContext', null);
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (methods.every((m) => SAFE_METHODS.has(m.toUpperCase()))) return;
    addRouteHook(route, 'onRequest', enter);
    // A body is read in the socket's context: re-enter the request's before validation.
    addRouteHook(route, 'preValidation', reenter);
  });
}

function enter(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  if (request.headers.traceparent === undefined) {
    done();
    return;
  }
  const incoming = incomingContext(request.headers);
  request.incomingTraceContext = incoming;
  context.with(incoming, done);
}

function reenter(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  const incoming = request.incomingTraceContext;
  if (incoming === null) done();
  else context.with(incoming, done);
}
