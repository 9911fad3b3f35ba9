import { type Span, trace } from '@opentelemetry/api';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify';
import { Counter } from 'prom-client';
import type { Metrics } from '../../adapters/telemetry/metrics.js';
import type { RateLimitGroup } from '../../config/config.js';
import { BackendUnavailableError, errors } from '../../domain/errors.js';
import type { RateLimitDecision, RateLimiter, RateLimitPolicy } from '../../ports/rate-limiter.js';
import { signedInUserId } from '../request-identity.js';
import { addRouteHook } from './route-hooks.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The route's rate-limit policy group, or `false` for none (health, metrics). When absent:
     * `auth` for changes under `/api/v1/auth/`, `writes` for POST/PUT/PATCH/DELETE, else `default`.
     */
    rateLimit?: RateLimitGroup | false;
    /** Set by the rate limiter on each limited route: see `decideBeforeRefusal`. */
    [RATE_LIMIT_CHECK]?: (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
  }
}

const RATE_LIMIT_CHECK = Symbol('urlshortener.rateLimitCheck');

/**
 * The rate-limit decision of a request that an earlier hook (CSRF, authentication) is about to
 * refuse: the same decision, headers and span attributes as any other request of the route, so
 * refused requests count too; rejects with the 429 when the limit is exceeded. Does nothing on
 * routes that are not limited (or with rate limiting off). Call once, just before refusing.
 */
export function decideBeforeRefusal(request: FastifyRequest, reply: FastifyReply): Promise<void> | undefined {
  return request.routeOptions.config[RATE_LIMIT_CHECK]?.(request, reply);
}

/** Where the policy of each group comes from; read on every request, so changes apply at once. */
export interface RateLimitPolicySource {
  get(group: RateLimitGroup): RateLimitPolicy;
}

export interface RateLimitOptions {
  readonly limiter: RateLimiter;
  readonly policies: RateLimitPolicySource;
  readonly metrics: Metrics;
  /** Put each decision on the request span (tracing on). */
  readonly traceDecisions: boolean;
}

/** Span attributes of a decision (spec §6.2 rule 9). */
export const RATE_LIMIT_ATTRIBUTES = {
  allowed: 'ratelimit.allowed',
  limit: 'ratelimit.limit',
  remaining: 'ratelimit.remaining',
  algorithm: 'ratelimit.algorithm',
  policy: 'ratelimit.policy',
} as const;

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** Unexpected store failures log at most this often (the request is admitted). */
const STORE_FAILURE_LOG_INTERVAL_MS = 10_000;

/** The policy group of a route: its `config.rateLimit`, else by path and method. */
export function rateLimitGroupOf(route: Pick<RouteOptions, 'url' | 'method' | 'config'>): RateLimitGroup | false {
  const configured = route.config?.rateLimit;
  if (configured !== undefined) return configured;
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  const writes = methods.some((m) => WRITE_METHODS.has(m.toUpperCase()));
  if (writes && route.url.startsWith('/api/v1/auth/')) return 'auth';
  return writes ? 'writes' : 'default';
}

/**
 * A decision made for a request before Fastify routed it (the redirect fast path), which then
 * handed the request on: the route's hook takes it instead of counting the request twice.
 */
export const DECIDED_BEFORE_ROUTING = Symbol('rate-limit decision made before routing');
type MaybeDecided = { [DECIDED_BEFORE_ROUTING]?: RateLimitDecision };

/** The two header values of a policy that do not change per request. */
interface PolicyHeaders {
  /** `RateLimit-Policy`. */
  readonly policy: string;
  /** The start of `RateLimit`, up to the remaining count. */
  readonly prefix: string;
}

/** The preValidation hook of each limited route, and what its decisions share. */
export class RateLimitHooks {
  private readonly refusals: Counter<'policy'>;
  private readonly failOpen: Counter<'policy'>;
  private readonly headers = new WeakMap<RateLimitPolicy, PolicyHeaders>();
  private lastStoreFailureLog = -Infinity;

  constructor(private readonly options: RateLimitOptions) {
    const registers = [options.metrics.registry];
    this.refusals = new Counter({
      name: 'rate_limit_refusals_total',
      help: 'Requests refused with 429 by the rate limiter, by policy.',
      labelNames: ['policy'],
      registers,
    });
    this.failOpen = new Counter({
      name: 'rate_limit_fail_open_total',
      help: 'Requests admitted without a decision because the rate-limit store failed or was away, by policy.',
      labelNames: ['policy'],
      registers,
    });
  }

  /** The hook of a route of `group`: a decision at once from the memory limiter, later from Redis. */
  hook(group: RateLimitGroup) {
    const { limiter, policies } = this.options;
    return (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
      const policy = policies.get(group);
      const early = (request.raw as MaybeDecided)[DECIDED_BEFORE_ROUTING];
      if (early !== undefined) {
        this.decide(request, reply, policy, early, done);
        return;
      }
      let decision: RateLimitDecision | Promise<RateLimitDecision>;
      try {
        decision = limiter.consume(clientKey(request), policy);
      } catch (error) {
        this.storeFailed(request, policy, error, done);
        return;
      }
      if (decision instanceof Promise) {
        decision.then(
          (d) => this.decide(request, reply, policy, d, done),
          (error: unknown) => this.storeFailed(request, policy, error, done),
        );
      } else {
        this.decide(request, reply, policy, decision, done);
      }
    };
  }

  /**
   * For a request answered before routing: the group's policy and its decision for the client
   * `key` (a promise with the Redis limiter). Throws, or rejects, when the store fails: then the
   * request goes through its route, whose hook admits it as `storeFailed` says.
   */
  consumeEarly(key: string, group: RateLimitGroup) {
    const policy = this.options.policies.get(group);
    return { policy, decision: this.options.limiter.consume(key, policy) };
  }

  /** Hands a request on to its route with the decision already made for it. */
  static handOn(raw: object, decision: RateLimitDecision): void {
    (raw as MaybeDecided)[DECIDED_BEFORE_ROUTING] = decision;
  }

  /** `RateLimit-Policy` of a policy. */
  policyHeader(policy: RateLimitPolicy): string {
    return this.headersOf(policy).policy;
  }

  /** `RateLimit` of a decision. */
  rateLimitHeader(policy: RateLimitPolicy, decision: RateLimitDecision): string {
    return `${this.headersOf(policy).prefix}${decision.remaining};t=${Math.ceil(decision.resetMs / 1000)}`;
  }

  private decide(
    request: FastifyRequest,
    reply: FastifyReply,
    policy: RateLimitPolicy,
    decision: RateLimitDecision,
    done: HookHandlerDoneFunction,
  ): void {
    reply.header('ratelimit-policy', this.policyHeader(policy));
    reply.header('ratelimit', this.rateLimitHeader(policy, decision));
    if (this.options.traceDecisions) traceDecision(request, policy, decision);
    if (decision.allowed) {
      done();
      return;
    }
    this.refusals.inc({ policy: policy.name });
    request.log.debug({ policy: policy.name }, 'rate limit exceeded');
    done(errors.rateLimited(Math.max(1, Math.ceil(decision.retryAfterMs / 1000))));
  }

  private headersOf(policy: RateLimitPolicy): PolicyHeaders {
    let headers = this.headers.get(policy);
    if (headers === undefined) {
      headers = {
        policy: `"${policy.name}";q=${policy.limit};w=${Math.ceil(policy.windowMs / 1000)}`,
        prefix: `"${policy.name}";r=`,
      };
      this.headers.set(policy, headers);
    }
    return headers;
  }

  private storeFailed(
    request: FastifyRequest,
    policy: RateLimitPolicy,
    error: unknown,
    done: HookHandlerDoneFunction,
  ): void {
    // Availability over strictness: while the store is away, requests are admitted.
    this.failOpen.inc({ policy: policy.name });
    // Redis away is said once by its link; anything else is worth a line now and then.
    const now = performance.now();
    if (
      !(error instanceof BackendUnavailableError) &&
      now - this.lastStoreFailureLog >= STORE_FAILURE_LOG_INTERVAL_MS
    ) {
      this.lastStoreFailureLog = now;
      request.log.error({ err: error }, 'rate limiter unavailable; admitting requests');
    }
    done();
  }
}

/** The decision on the request span, when it is recording (spec §6.2 rule 9). */
function traceDecision(request: FastifyRequest, policy: RateLimitPolicy, decision: RateLimitDecision): void {
  describeDecision(request.requestTrace?.span ?? trace.getActiveSpan(), policy, decision);
}

/** The decision's attributes on `span`, when it is recording (also the redirect fast path's). */
export function describeDecision(span: Span | undefined, policy: RateLimitPolicy, decision: RateLimitDecision): void {
  if (!span?.isRecording()) return;
  span.setAttributes({
    [RATE_LIMIT_ATTRIBUTES.allowed]: decision.allowed,
    [RATE_LIMIT_ATTRIBUTES.limit]: decision.limit,
    [RATE_LIMIT_ATTRIBUTES.remaining]: decision.remaining,
    [RATE_LIMIT_ATTRIBUTES.algorithm]: policy.algorithm,
    [RATE_LIMIT_ATTRIBUTES.policy]: policy.name,
  });
}

/**
 * Rate limiting per route group (design "Rate limiting"), keyed by the signed-in user when there
 * is one, else by client address. Runs before validation, so malformed requests count too.
 * Every answer of a limited route carries `RateLimit-Policy` and `RateLimit` (IETF httpapi
 * ratelimit-headers draft); a refusal is 429 `{"detail":"Rate limit exceeded"}` with
 * `Retry-After`. Call before any route is registered: routes are set up as they are added.
 */
export function registerRateLimiting(app: FastifyInstance, options: RateLimitOptions): RateLimitHooks {
  const hooks = new RateLimitHooks(options);
  app.addHook('onRoute', (route) => {
    const group = rateLimitGroupOf(route);
    if (group === false) return;
    const hook = hooks.hook(group);
    addRouteHook(route, 'preValidation', hook);
    const check = (request: FastifyRequest, reply: FastifyReply) =>
      new Promise<void>((resolve, reject) =>
        hook(request, reply, (error?: Error) => (error ? reject(error) : resolve())),
      );
    route.config = { ...route.config, [RATE_LIMIT_CHECK]: check };
  });
  return hooks;
}

/** The signed-in user, when there is one, else the client address (`TRUST_PROXY` honoured). */
function clientKey(request: FastifyRequest): string {
  const user = signedInUserId(request);
  return user === undefined ? request.ip : `user:${user}`;
}
