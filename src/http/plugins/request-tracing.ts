import {
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  type SpanOptions,
  SpanStatusCode,
  trace,
  type Tracer,
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
  ATTR_SERVER_PORT,
  ATTR_URL_PATH,
  ATTR_URL_QUERY,
  ATTR_URL_SCHEME,
  ATTR_USER_AGENT_ORIGINAL,
} from '@opentelemetry/semantic-conventions';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { rootSampling } from '../../adapters/telemetry/root-sampling.js';
import { SPAN_ATTRIBUTES } from '../../adapters/telemetry/span-attributes.js';
import { signedInUserId } from '../request-identity.js';
import { addRouteHook } from './route-hooks.js';

/** The server span of a request and the context it runs in. */
export interface RequestTrace {
  readonly span: Span;
  readonly context: Context;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's server span and context; null while it has none (tracing off, or a dropped new trace). */
    requestTrace: RequestTrace | null;
  }
}

/**
 * Set on a request whose new trace was sampled before Fastify routed it (the redirect fast path,
 * which then hands it on): its decision is primed, so the span is started without asking again.
 */
export const SAMPLED_BEFORE_ROUTING = Symbol('new trace sampled before routing');
/**
 * Set on a request whose server span the redirect fast path already started (and described)
 * before handing it on: the route's hooks continue that span instead of starting one.
 */
const TRACED_BEFORE_ROUTING = Symbol('request traced before routing');
type MaybeSampled = { [SAMPLED_BEFORE_ROUTING]?: true; [TRACED_BEFORE_ROUTING]?: RequestTrace };

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
/** Methods whose handlers in this service publish no events and make no calls on the request's behalf. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const SERVER: SpanOptions = Object.freeze({ kind: SpanKind.SERVER });
const TRACER_NAME = 'urlshortener.http';

/**
 * The server span of every request (spec §6.2 rule 1), made here rather than by the HTTP
 * instrumentation, which does its work (attributes, event-emitter binding) for every request,
 * sampled or not. The span continues an incoming W3C `traceparent`, is named `METHOD /route`
 * with `http.route` (never the raw URL), carries `client.address` as the app sees it
 * (`TRUST_PROXY` honoured), `enduser.id` when a user is signed in, the status code, and the
 * error of a 5xx. It is the active span from routing to the answer, so statements, outgoing
 * calls and log lines of the request belong to it.
 *
 * Every request gets a sampling decision, and the cheapest possible one when it is "drop":
 * - A request that starts a new trace (no `traceparent` or `baggage` header) is decided by the
 *   configured sampler before anything is made (`RootSampling`).
 *   - Dropped, on a route of safe methods only (GET, HEAD, OPTIONS: the redirect path): no span,
 *     no context, no closure; the request runs in the root context, as with tracing off. Its
 *     descendants cannot inherit the "drop", which is safe because in this service such
 *     requests have none that would be traced: DB statements and Redis commands need a
 *     recording parent, and no read handler publishes an event or calls out on the request's
 *     behalf (clicks are published by the background flush). A read handler that starts doing so
 *     would see its outgoing calls sampled afresh at the same ratio.
 *   - Dropped, on a route that changes data: a non-recording span in the request's context, so
 *     the events it publishes and the calls it makes carry the "drop" (spec §6.2 rules 3, 5)
 *     instead of starting headless traces of their own.
 * - A request with an incoming `traceparent` follows its parent (parent-based sampler) and
 *   always gets a span and a context, recording or not, so the parent's decision reaches
 *   its outgoing calls and events. An invalid `traceparent` starts a new trace.
 *
 * Register only when tracing is on, before any route is registered.
 */
export function registerRequestTracing(app: FastifyInstance): void {
  const tracer = new RequestTracer(trace.getTracer(TRACER_NAME));
  app.decorateRequest('requestTrace', null);

  app.addHook('onRoute', (route) => {
    const path = route.url;
    // Span names by method, made once per route rather than per request.
    const names = new Map<string, string>();
    const nameOf = (method: string) => {
      let name = names.get(method);
      if (name === undefined) names.set(method, (name = `${method} ${path}`));
      return name;
    };
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).map((m) => m.toUpperCase());
    const safe = methods.every((m) => SAFE_METHODS.has(m));
    addRouteHook(route, 'onRequest', (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction) =>
      tracer.start(request, nameOf(request.method), path, safe, done),
    );
    if (methods.some((m) => BODY_METHODS.has(m))) addRouteHook(route, 'preValidation', RequestTracer.reenter);
    // Fastify runs onResponse also when the client went away before the answer.
    addRouteHook(route, 'onResponse', RequestTracer.end);
  });

  // Requests no route matched: a span named by the method alone.
  app.addHook('onRequest', (request, _reply, done) =>
    request.is404 ? tracer.start(request, request.method, undefined, SAFE_METHODS.has(request.method), done) : done(),
  );
  app.addHook('onResponse', (request, reply, done) =>
    request.is404 ? RequestTracer.end(request, reply, done) : done(),
  );
  app.addHook('onError', (request, _reply, error, done) => {
    RequestTracer.failed(request, error);
    done();
  });
}

/** Marks a request whose new trace `RootSampling.sampleNewTrace` just chose to record. */
export function markSampledBeforeRouting(raw: object): void {
  (raw as MaybeSampled)[SAMPLED_BEFORE_ROUTING] = true;
}

/** The trace the redirect fast path started for `raw`, if any. */
export function tracedBeforeRouting(raw: object): RequestTrace | undefined {
  return (raw as MaybeSampled)[TRACED_BEFORE_ROUTING];
}

/**
 * The server span of a new trace `RootSampling.sampleNewTrace` just chose to record, started
 * before Fastify sees the request (the redirect fast path) and described as the route's hook
 * would describe it: the fast path answers it and ends it with `endTraceBeforeRouting`, or hands
 * the request on and the route's hooks continue and end it. Only for a request no trusted proxy
 * speaks for (`TRUST_PROXY` off): its scheme, host and client are the socket's.
 */
export function startTraceBeforeRouting(raw: IncomingMessage, name: string, route: string): RequestTrace {
  const span = fastPathTracer().startSpan(name, SERVER, ROOT_CONTEXT);
  if (span.isRecording()) {
    const host = hostOf(raw.headers.host ?? '');
    describeRequest(
      span,
      {
        method: raw.method!,
        protocol: (raw.socket as { encrypted?: boolean }).encrypted === true ? 'https' : 'http',
        hostname: host.hostname,
        port: host.port,
        ip: raw.socket.remoteAddress,
        raw,
        headers: raw.headers,
      },
      route,
    );
  }
  const started: RequestTrace = { span, context: new RootSpanContext(span) };
  (raw as MaybeSampled)[TRACED_BEFORE_ROUTING] = started;
  return started;
}

/** Ends a span of `startTraceBeforeRouting` whose request the fast path answered with `status`. */
export function endTraceBeforeRouting(started: RequestTrace, status: number): void {
  // No session on the redirect path: no `enduser.id`; and the fast path answers no 5xx.
  if (started.span.isRecording()) started.span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
  started.span.end();
}

/** The tracer of `startTraceBeforeRouting`, looked up once for each tracing started rather than per request. */
let fastTracer: { readonly roots: ReturnType<typeof rootSampling>; readonly tracer: Tracer } | undefined;

function fastPathTracer(): Tracer {
  const roots = rootSampling();
  if (fastTracer === undefined || fastTracer.roots !== roots)
    fastTracer = { roots, tracer: trace.getTracer(TRACER_NAME) };
  return fastTracer.tracer;
}

/** A `Host` header and what it names without a trusted proxy. */
type Host = { readonly host: string; readonly hostname: string; readonly port: number | null };

/** The last `Host` header parsed: the clients of one service name it the same way, request after request. */
let lastHost: Host = { host: '', hostname: '', port: null };

function hostOf(host: string): Host {
  if (host !== lastHost.host) lastHost = { host, hostname: hostnameOf(host), port: portOf(host) };
  return lastHost;
}

/** The API's key of the active span in a context (`trace.setSpan`'s), found once by asking `trace.getSpan` for it. */
const SPAN_KEY: symbol = (() => {
  let key: symbol | undefined;
  trace.getSpan({
    getValue: (asked) => {
      key = asked;
      return undefined;
    },
    setValue: () => ROOT_CONTEXT,
    deleteValue: () => ROOT_CONTEXT,
  });
  if (key === undefined) throw new Error('@opentelemetry/api: trace.getSpan read no context key');
  return key;
})();

/**
 * `trace.setSpan(ROOT_CONTEXT, span)` for the server span of a new trace, without what the API's
 * context costs to make (a Map and three closures an instance): the context of every sampled
 * request, most of which never adds a value to it.
 */
class RootSpanContext implements Context {
  constructor(private readonly span: Span) {}

  getValue(key: symbol): unknown {
    return key === SPAN_KEY ? this.span : undefined;
  }

  setValue(key: symbol, value: unknown): Context {
    return trace.setSpan(ROOT_CONTEXT, this.span).setValue(key, value);
  }

  deleteValue(key: symbol): Context {
    return key === SPAN_KEY ? ROOT_CONTEXT : this;
  }
}

/** Fastify's `request.hostname` without a trusted proxy: the `Host` header without its port. */
function hostnameOf(host: string): string {
  return host[0] === '[' ? host.slice(0, host.indexOf(']') + 1) : host.split(':', 1)[0]!;
}

/** Fastify's `request.port` without a trusted proxy: the `Host` header's port, else null. */
function portOf(host: string): number | null {
  const match = /:(\d+)$/.exec(host);
  return match === null ? null : Number.parseInt(match[1]!, 10);
}

/** The hooks' work: a span started (or not) per request, re-entered, ended. */
class RequestTracer {
  constructor(private readonly tracer: Tracer) {}

  start(
    request: FastifyRequest,
    name: string,
    route: string | undefined,
    safe: boolean,
    done: HookHandlerDoneFunction,
  ) {
    const early = (request.raw as MaybeSampled)[TRACED_BEFORE_ROUTING];
    if (early !== undefined) {
      request.requestTrace = early;
      context.with(early.context, done);
      return;
    }
    const { headers } = request;
    let parent = ROOT_CONTEXT;
    let span: Span;
    // Looked up at each request: tracing starts before the app, but a test may start it later.
    const roots = rootSampling();
    if (roots !== undefined && headers.traceparent === undefined && headers.baggage === undefined) {
      if (
        (request.raw as MaybeSampled)[SAMPLED_BEFORE_ROUTING] === true ||
        roots.sampleNewTrace(name, SpanKind.SERVER)
      ) {
        span = this.tracer.startSpan(name, SERVER, ROOT_CONTEXT);
      } else if (safe) {
        done();
        return;
      } else {
        span = trace.wrapSpanContext(roots.droppedSpanContext());
      }
    } else {
      parent = propagation.extract(ROOT_CONTEXT, headers);
      span = this.tracer.startSpan(name, SERVER, parent);
    }
    if (span.isRecording()) describeRequest(span, request, route);
    const active = parent === ROOT_CONTEXT ? new RootSpanContext(span) : trace.setSpan(parent, span);
    request.requestTrace = { span, context: active };
    context.with(active, done);
  }

  /** A body is read in the socket's context: re-enter the request's before validation. */
  static reenter(this: void, request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
    const current = request.requestTrace;
    if (current === null) done();
    else context.with(current.context, done);
  }

  static end(this: void, request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    const current = request.requestTrace;
    if (current === null) {
      done();
      return;
    }
    request.requestTrace = null;
    const { span } = current;
    if (span.isRecording()) describeAnswer(span, request, reply.statusCode);
    span.end();
    // The answer was written from a socket callback, outside the request's context: the
    // hooks after this one and the "request completed" log line still belong to the request.
    context.with(current.context, done);
  }

  /** A 5xx error on the recording span. */
  static failed(this: void, request: FastifyRequest, error: Error): void {
    const status = (error as { statusCode?: number }).statusCode ?? 500;
    const span = request.requestTrace?.span;
    if (status >= 500 && span?.isRecording()) {
      span.recordException(error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
    }
  }
}

/** The answer's attributes of a recording server span. */
function describeAnswer(span: Span, request: FastifyRequest, status: number): void {
  span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
  const user = signedInUserId(request);
  if (user !== undefined) span.setAttribute(SPAN_ATTRIBUTES.enduserId, user);
  if (status >= 500) {
    span.setAttribute(ATTR_ERROR_TYPE, String(status));
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
}

/** What `describeRequest` reads of a request: a Fastify request, or the fast path's view of a raw one. */
type DescribedRequest = Pick<FastifyRequest, 'method' | 'protocol' | 'hostname' | 'headers'> & {
  readonly ip: string | undefined;
  readonly port?: number | null;
  readonly raw: IncomingMessage;
};

/** `server.port`: the `Host` header's port, else the scheme's default when it names a host, else the socket's. */
function serverPort(request: DescribedRequest): number | undefined {
  const port = request.port;
  if (typeof port === 'number') return port;
  if (request.hostname !== '') return request.protocol === 'https' ? 443 : 80;
  return request.raw.socket.localPort;
}

/** The request attributes of a recording server span (HTTP server semantic conventions). */
function describeRequest(span: Span, request: DescribedRequest, route: string | undefined): void {
  const { raw } = request;
  const query = raw.url?.indexOf('?') ?? -1;
  span.setAttributes({
    [ATTR_HTTP_REQUEST_METHOD]: request.method,
    [ATTR_URL_SCHEME]: request.protocol,
    [ATTR_URL_PATH]: query === -1 ? raw.url : raw.url!.slice(0, query),
    [ATTR_SERVER_ADDRESS]: request.hostname,
    [ATTR_SERVER_PORT]: serverPort(request),
    [ATTR_CLIENT_ADDRESS]: request.ip,
    [ATTR_NETWORK_PEER_ADDRESS]: raw.socket.remoteAddress,
    [ATTR_NETWORK_PROTOCOL_VERSION]: raw.httpVersion,
  });
  if (query !== -1) span.setAttribute(ATTR_URL_QUERY, raw.url!.slice(query + 1));
  if (route !== undefined) span.setAttribute(ATTR_HTTP_ROUTE, route);
  const agent = request.headers['user-agent'];
  if (agent !== undefined) span.setAttribute(ATTR_USER_AGENT_ORIGINAL, agent);
}
