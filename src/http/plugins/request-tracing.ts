import {
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import {
  ATTR_CLIENT_ADDRESS,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_NETWORK_PEER_ADDRESS,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_SERVER_ADDRESS,
  ATTR_URL_PATH,
  ATTR_URL_QUERY,
  ATTR_URL_SCHEME,
  ATTR_USER_AGENT_ORIGINAL,
} from '@opentelemetry/semantic-conventions';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { SPAN_ATTRIBUTES } from '../../adapters/telemetry/span-attributes.js';
import { signedInUserId } from '../request-identity.js';
import { addRouteHook } from './route-hooks.js';

/** The server span of a request and the context it runs in. */
interface RequestTrace {
  readonly span: Span;
  readonly context: Context;
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * The server span of every request (spec §6.2 rule 1), made here rather than by the HTTP
 * instrumentation, which does its work (attributes, event-emitter binding) for every request,
 * sampled or not. Here the sampler decides first and an unsampled request costs one
 * non-recording span. The span continues an incoming W3C `traceparent`, is named
 * `METHOD /route` with `http.route` (never the raw URL), carries `client.address` as the app sees
 * it (`TRUST_PROXY` honoured), `enduser.id` when a user is signed in, the status code, and the
 * error of a 5xx. It is the active span from routing to the answer, so statements, outgoing
 * calls and log lines of the request belong to it.
 *
 * Register only when tracing is on, before any route is registered.
 */
export function registerRequestTracing(app: FastifyInstance): void {
  const tracer = trace.getTracer('urlshortener.http');
  const traces = new WeakMap<FastifyRequest, RequestTrace>();

  const start = (request: FastifyRequest, route: string | undefined, done: HookHandlerDoneFunction) => {
    const parent = propagation.extract(ROOT_CONTEXT, request.headers);
    const span = tracer.startSpan(
      route === undefined ? request.method : `${request.method} ${route}`,
      { kind: SpanKind.SERVER },
      parent,
    );
    if (span.isRecording()) {
      const { raw } = request;
      const query = raw.url?.indexOf('?') ?? -1;
      span.setAttributes({
        [ATTR_HTTP_REQUEST_METHOD]: request.method,
        [ATTR_URL_SCHEME]: request.protocol,
        [ATTR_URL_PATH]: query === -1 ? raw.url : raw.url!.slice(0, query),
        [ATTR_SERVER_ADDRESS]: request.hostname,
        [ATTR_CLIENT_ADDRESS]: request.ip,
        [ATTR_NETWORK_PEER_ADDRESS]: raw.socket.remoteAddress,
        [ATTR_NETWORK_PROTOCOL_VERSION]: raw.httpVersion,
      });
      if (query !== -1) span.setAttribute(ATTR_URL_QUERY, raw.url!.slice(query + 1));
      if (route !== undefined) span.setAttribute(ATTR_HTTP_ROUTE, route);
      const agent = request.headers['user-agent'];
      if (agent !== undefined) span.setAttribute(ATTR_USER_AGENT_ORIGINAL, agent);
    }
    const active = trace.setSpan(parent, span);
    traces.set(request, { span, context: active });
    context.with(active, done);
  };

  // A body is read in the socket's context: re-enter the request's before validation.
  const reenter = (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const current = traces.get(request);
    if (current === undefined) done();
    else context.with(current.context, done);
  };

  const end = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const current = traces.get(request);
    if (current !== undefined) {
      traces.delete(request);
      const { span } = current;
      if (span.isRecording()) {
        const status = reply.statusCode;
        span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
        const user = signedInUserId(request);
        if (user !== undefined) span.setAttribute(SPAN_ATTRIBUTES.enduserId, user);
        if (status >= 500) {
          span.setAttribute(ATTR_ERROR_TYPE, String(status));
          span.setStatus({ code: SpanStatusCode.ERROR });
        }
      }
      span.end();
    }
    done();
  };

  app.addHook('onRoute', (route) => {
    const path = route.url;
    addRouteHook(route, 'onRequest', (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) =>
      start(request, path, done),
    );
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (methods.some((m) => BODY_METHODS.has(m.toUpperCase()))) addRouteHook(route, 'preValidation', reenter);
    // Fastify runs onResponse also when the client went away before the answer.
    addRouteHook(route, 'onResponse', end);
  });

  // Requests no route matched: a span named by the method alone.
  app.addHook('onRequest', (request, _reply, done) => (request.is404 ? start(request, undefined, done) : done()));
  app.addHook('onResponse', (request, reply, done) => (request.is404 ? end(request, reply, done) : done()));

  app.addHook('onError', (request, _reply, error, done) => {
    const status = (error as { statusCode?: number }).statusCode ?? 500;
    const span = traces.get(request)?.span;
    if (status >= 500 && span?.isRecording()) {
      span.recordException(error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
    }
    done();
  });
}
