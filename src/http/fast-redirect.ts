import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { context, SpanKind } from '@opentelemetry/api';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { rootSampling } from '../adapters/telemetry/root-sampling.js';
import { CODE_MAX_LENGTH, CODE_MIN_LENGTH } from '../domain/url-mapping.js';
import { AppError } from '../domain/errors.js';
import type { RateLimitDecision, RateLimitPolicy } from '../ports/rate-limiter.js';
import type { UrlMappingService } from '../services/url-mapping-service.js';
import type { CachedTarget } from '../support/redirect-cache.js';
import type { RequestSeries } from '../adapters/telemetry/request-metrics.js';
import type { RouteSeries } from './plugins/http-metrics.js';
import { describeDecision, RateLimitHooks } from './plugins/rate-limit.js';
import { logsAt } from './plugins/request-logger.js';
import {
  endTraceBeforeRouting,
  markSampledBeforeRouting,
  startTraceBeforeRouting,
  tracedBeforeRouting,
} from './plugins/request-tracing.js';
import { NOSNIFF } from './plugins/security-headers.js';

/** The error handler's `nosniff`, on the fast path's 404 as on the route's. */
const NOSNIFF_HEADER = Object.entries(NOSNIFF).flat();

/** The route the fast path answers for: its requests count in this route's metrics. */
export const REDIRECT_ROUTE = '/:code';

export interface FastRedirectOptions {
  readonly service: UrlMappingService;
  readonly cacheControl: string;
  /** The `/:code` route's metric series (`registerHttpMetrics`). */
  readonly series: RouteSeries;
  /** First path segments of the other routes: never answered here. */
  readonly reservedCodes: () => ReadonlySet<string>;
  readonly logger: FastifyBaseLogger;
  /** Tracing on: each request gets the sampling decision the route's would. */
  readonly tracing: boolean;
  /** Rate limiting on: its hooks, for the `redirects` group's decisions. */
  readonly rateLimit?: RateLimitHooks;
  /** `TRUST_PROXY` set: a request with `X-Forwarded-For` is keyed by Fastify, not here. */
  readonly trustProxy: boolean;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

const SPAN_NAMES = { GET: `GET ${REDIRECT_ROUTE}`, HEAD: `HEAD ${REDIRECT_ROUTE}` } as const;
const NO_HEADERS: readonly string[] = [];
const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * `GET|HEAD /{code}` answered in front of Fastify, from the node:http `request` event: the
 * redirect path does only what it must (rate-limit decision, lookup, click, metric, sampling
 * decision) and writes the same bytes as the `/:code` route. Everything it does not answer in
 * full goes on to Fastify untouched, with what was already decided for it (a rate-limit
 * decision, a sampled new trace) so that nothing is decided or counted twice:
 * - another method or path, a code the route would reject or that another route owns;
 * - a request that needs more than the fast path knows: logging at debug level, `X-Forwarded-For`
 *   behind a trusted proxy, an incoming `traceparent` or `baggage`, a new trace that is sampled
 *   behind a trusted proxy (`TRUST_PROXY` set: the route describes scheme, host and client);
 * - a refusal (429), a lookup that failed with anything but "not found", a rate-limit store away;
 * - the app closing (Fastify answers 503).
 * A new trace that is sampled (no trusted proxy) gets its server span here, described as the
 * route's hook would (`startTraceBeforeRouting`), with the rate-limit decision's attributes and as
 * the active span of its lookup; handed on, the route continues that span.
 * A request it answers touches no header but the ones it reads, and allocates little more than
 * its answer's header list.
 */
export class FastRedirect {
  /** The route's series of GET and HEAD answered 302, kept once made (on first use, as the route's hook does). */
  private readonly redirects: { GET?: RequestSeries; HEAD?: RequestSeries } = {};

  /**
   * @param fastify the app's own `request` listener: everything this path does not answer in full
   * @param idleMs the connection timeout, armed on the socket before this path waits for anything
   *   (a rate-limit decision or a lookup that is a promise) and after an answer the kernel did not
   *   take whole; 0: none (installFastRedirect)
   */
  constructor(
    private readonly options: FastRedirectOptions,
    private readonly fastify: Handler,
    private readonly idleMs = 0,
  ) {}

  /** Before a step that waits: the connection timeout on the socket, as on a routed request. */
  private waits(req: IncomingMessage): void {
    if (this.idleMs > 0) req.socket.setTimeout(this.idleMs);
  }

  /**
   * After an answer is written: if it is not all in the kernel's buffer (a client that does not
   * read, pipelining requests behind it), the connection timeout on its socket, so that a
   * connection whose answers stop moving is closed as it would be by node.
   */
  private written(res: ServerResponse): void {
    if (res.socket === null || res.req.socket.writableLength > 0) this.waits(res.req);
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    const method = req.method;
    if (method !== 'GET' && method !== 'HEAD') return this.fastify(req, res);
    const code = codeOf(req.url!);
    const { options } = this;
    if (
      code === undefined ||
      options.reservedCodes().has(code) ||
      logsAt(options.logger, 'debug') ||
      (options.trustProxy && req.headers['x-forwarded-for'] !== undefined)
    ) {
      return this.fastify(req, res);
    }
    if (!options.tracing) return this.admit(req, res, code, method);
    const sampling = this.sampling(req, method);
    if (sampling === 'dropped') return this.admit(req, res, code, method);
    if (sampling === 'route' || options.trustProxy) return this.fastify(req, res);
    // A new trace that is kept: its server span here, as the route's hook would make it.
    const started = startTraceBeforeRouting(req, SPAN_NAMES[method], REDIRECT_ROUTE);
    context.with(started.context, () => this.admit(req, res, code, method));
  }

  /** The rate-limit decision, then the lookup: the part of `handle` after the request is known to be ours. */
  private admit(req: IncomingMessage, res: ServerResponse, code: string, method: 'GET' | 'HEAD'): void {
    const start = performance.now();
    const limit = this.options.rateLimit;
    const key = req.socket.remoteAddress;
    if (limit === undefined) return this.resolve(req, res, code, method, start, NO_HEADERS, undefined);
    if (key === undefined) return this.fastify(req, res);
    let early: ReturnType<RateLimitHooks['consumeEarly']>;
    try {
      early = limit.consumeEarly(key, 'redirects');
    } catch {
      return this.fastify(req, res); // the route's hook admits it and says why
    }
    const { policy, decision } = early;
    if (decision instanceof Promise) {
      this.waits(req);
      decision.then(
        (d) => this.safely(req, res, () => this.decided(req, res, code, method, start, limit, policy, d)),
        () => this.fastify(req, res),
      );
    } else {
      this.decided(req, res, code, method, start, limit, policy, decision);
    }
  }

  /** Runs a step of an answer that comes later (a promise settled), as the listener runs `handle`. */
  private safely(req: IncomingMessage, res: ServerResponse, step: () => void): void {
    try {
      step();
    } catch (error) {
      this.broke(req, res, error);
    }
  }

  /**
   * A throw while answering (none is expected: every value written was checked when stored): it
   * is logged, and the request goes on to Fastify if nothing was written yet.
   */
  broke(req: IncomingMessage, res: ServerResponse, error: unknown): void {
    this.options.logger.error({ err: error }, 'redirect fast path failed; the route answers');
    if (!res.headersSent) return this.fastify(req, res); // it continues the span, if one was started
    res.destroy();
    if (this.options.tracing) this.traced(res, res.statusCode);
  }

  /**
   * The route's tracing hook's decision for this request, made here once: `dropped` (a new trace
   * not kept: no span), `sampled` (a new trace kept: the next root span started gets it) or
   * `route` (an incoming `traceparent` or `baggage`, which the route's hook follows).
   */
  private sampling(req: IncomingMessage, method: 'GET' | 'HEAD'): 'dropped' | 'sampled' | 'route' {
    const { headers } = req;
    if (headers.traceparent !== undefined || headers.baggage !== undefined) return 'route';
    const roots = rootSampling();
    if (roots === undefined) return 'route';
    if (!roots.sampleNewTrace(SPAN_NAMES[method], SpanKind.SERVER)) return 'dropped';
    // Behind a trusted proxy the route describes the span (its scheme, host and client): it starts it.
    if (this.options.trustProxy) markSampledBeforeRouting(req);
    return 'sampled';
  }

  private decided(
    req: IncomingMessage,
    res: ServerResponse,
    code: string,
    method: 'GET' | 'HEAD',
    start: number,
    limit: RateLimitHooks,
    policy: RateLimitPolicy,
    decision: RateLimitDecision,
  ): void {
    if (!decision.allowed) {
      RateLimitHooks.handOn(req, decision);
      return this.fastify(req, res);
    }
    if (this.options.tracing) describeDecision(tracedBeforeRouting(req)?.span, policy, decision);
    const headers = [
      'ratelimit-policy',
      limit.policyHeader(policy),
      'ratelimit',
      limit.rateLimitHeader(policy, decision),
    ];
    this.resolve(req, res, code, method, start, headers, decision);
  }

  private resolve(
    req: IncomingMessage,
    res: ServerResponse,
    code: string,
    method: 'GET' | 'HEAD',
    start: number,
    headers: readonly string[],
    decision: RateLimitDecision | undefined,
  ): void {
    let target: CachedTarget | Promise<CachedTarget>;
    try {
      target = this.options.service.resolve(code, method === 'GET', req.rawHeaders, req.socket.remoteAddress);
    } catch (error) {
      return this.failed(req, res, method, start, headers, decision, error);
    }
    if (target instanceof Promise) {
      this.waits(req);
      target.then(
        (t) => this.safely(req, res, () => this.redirect(res, method, start, headers, t)),
        (error: unknown) => this.safely(req, res, () => this.failed(req, res, method, start, headers, decision, error)),
      );
    } else {
      this.redirect(res, method, start, headers, target);
    }
  }

  /** Writes the 302 (the route's bytes) and counts it. */
  redirect(
    res: ServerResponse,
    method: 'GET' | 'HEAD',
    start: number,
    headers: readonly string[],
    target: CachedTarget,
  ): void {
    const { cacheControl } = this.options;
    const location = target.location;
    // Written out rather than spread: this runs per request.
    res.writeHead(
      302,
      headers.length === 0
        ? ['cache-control', cacheControl, 'location', location, 'content-length', '0']
        : [
            headers[0]!,
            headers[1]!,
            headers[2]!,
            headers[3]!,
            'cache-control',
            cacheControl,
            'location',
            location,
            'content-length',
            '0',
          ],
    );
    res.end();
    this.written(res);
    (this.redirects[method] ??= this.options.series(method, 302)).observe((performance.now() - start) / 1000);
    if (this.options.tracing) this.traced(res, 302);
  }

  /**
   * Not found or gone (a link past its limits): the route's 404 or 410. Anything else goes on to
   * the route, which answers it as the error handler says.
   */
  private failed(
    req: IncomingMessage,
    res: ServerResponse,
    method: 'GET' | 'HEAD',
    start: number,
    headers: readonly string[],
    decision: RateLimitDecision | undefined,
    error: unknown,
  ): void {
    if (!(error instanceof AppError) || (error.statusCode !== 404 && error.statusCode !== 410) || res.headersSent) {
      if (decision !== undefined) RateLimitHooks.handOn(req, decision);
      return this.fastify(req, res);
    }
    const body = JSON.stringify({ detail: error.detail });
    const status = error.statusCode;
    res.writeHead(status, [
      ...headers,
      ...NOSNIFF_HEADER,
      'content-type',
      JSON_TYPE,
      'content-length',
      String(Buffer.byteLength(body)),
    ]);
    res.end(body);
    this.written(res);
    this.options.series(method, status).observe((performance.now() - start) / 1000);
    if (this.options.tracing) this.traced(res, status);
  }

  /** Ends the server span this path started for the request it just answered, if it started one. */
  private traced(res: ServerResponse, status: number): void {
    const started = tracedBeforeRouting(res.req);
    if (started !== undefined) endTraceBeforeRouting(started, status);
  }
}

/** The code of `/{code}` or `/{code}?…` when it is 6 to 10 ASCII letters and digits, as the route's schema wants. */
function codeOf(url: string): string | undefined {
  let end = 1;
  const length = url.length;
  if (url.charCodeAt(0) !== 0x2f) return undefined;
  while (end < length) {
    const c = url.charCodeAt(end);
    const alnum = (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
    if (!alnum) break;
    end++;
  }
  const size = end - 1;
  if (size < CODE_MIN_LENGTH || size > CODE_MAX_LENGTH) return undefined;
  if (end < length && url.charCodeAt(end) !== 0x3f) return undefined;
  return end === length ? url.slice(1) : url.slice(1, end);
}

/**
 * Puts the fast path in front of the app's own `request` listener. Call after every route is
 * registered. Requests injected with `app.inject()` never reach it: they go through the route.
 *
 * The connection timeout (`CONNECTION_TIMEOUT_MS`: Fastify's `connectionTimeout`, node's
 * `server.timeout`) is kept wherever it can matter, and left off the redirects answered at once.
 * Node arms it on every socket when a request arrives and re-arms it on every read and write
 * (`socket.setTimeout`): 5-7% of a redirect's CPU (bench/PROFILE.md). Here it is armed on a new
 * connection (until its first answer), on every request handed to Fastify, before this path
 * waits for a decision or a lookup, and after it writes an answer that the kernel did not take
 * whole (a client that stopped reading); between requests node's keep-alive timeout holds the
 * socket as before. An answer written in the turn its request arrived and taken by the kernel
 * has nothing left to time.
 */
export function installFastRedirect(app: FastifyInstance, options: FastRedirectOptions): void {
  const server = app.server;
  const [routed] = server.listeners('request') as Handler[];
  if (routed === undefined) throw new Error('the app has no request listener to put the redirect fast path before');
  server.removeListener('request', routed);
  const idleMs = server.timeout;
  let fastify = routed;
  if (idleMs > 0) {
    server.timeout = 0;
    server.on('connection', (socket: Socket) => socket.setTimeout(idleMs));
    fastify = (req, res) => {
      req.socket.setTimeout(idleMs);
      routed(req, res);
    };
  }
  const fast = new FastRedirect(options, fastify, idleMs);
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true; // Fastify answers 503 from now on
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (closing) {
      fastify(req, res);
      return;
    }
    try {
      fast.handle(req, res);
    } catch (error) {
      fast.broke(req, res, error);
    }
  });
}
