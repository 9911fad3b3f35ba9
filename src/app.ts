import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyHttpOptions,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import type { Config, HttpTimeouts } from './config/config.js';
import { errors } from './domain/errors.js';
import { frameworkErrorHandler, registerErrorHandling } from './http/error-handler.js';
import { DOCS_HEADERS, docsCsp, registerSecurityHeaders } from './http/plugins/security-headers.js';
import { clientErrorHandler } from './http/client-errors.js';
import type { RouteTable } from './http/route-table.js';
import type { Metrics } from './adapters/telemetry/metrics.js';
import { healthRoutes } from './http/routes/health.js';
import { installFastRedirect, REDIRECT_ROUTE } from './http/fast-redirect.js';
import { registerHttpMetrics, type RouteSeries } from './http/plugins/http-metrics.js';
import { type RateLimitHooks, type RateLimitPolicySource, registerRateLimiting } from './http/plugins/rate-limit.js';
import { registerRequestTracing } from './http/plugins/request-tracing.js';
import { registerContextPropagation } from './http/plugins/context-propagation.js';
import { lazyRequestLogger, logsAt } from './http/plugins/request-logger.js';
import type { RateLimiter } from './ports/rate-limiter.js';
import type { ReadinessCheck } from './ports/readiness-check.js';
import { metricsRoutes } from './http/routes/metrics.js';
import { urlMappingRoutes } from './http/routes/url-mappings.js';
import { faviconRoutes } from './http/routes/favicon.js';
import { webAppRoutes } from './http/routes/web-app.js';
import { SHARED_SCHEMAS } from './http/schemas.js';
import { createSchemaCompilers, requireBodiesByMediaType, type SchemaCompilers } from './http/validation.js';
import type { UrlMappingService } from './services/url-mapping-service.js';
import type { VisitStatsService } from './services/visit-stats-service.js';
import type { LinkTransferService } from './services/link-transfer-service.js';
import type { SecurityMetrics } from './ports/security-metrics.js';
import { apiScope } from './http/api-scope.js';
import { documentSecurity, SECURITY_SCHEMES } from './http/openapi-security.js';
import type { ApiKeyService } from './services/api-key-service.js';
import type { AuthService } from './services/auth-service.js';
import type { UserAdminService } from './services/user-admin-service.js';
import type { RuntimeSettings } from './services/runtime-settings.js';
import type { DeadLetterManager } from './services/dead-letter-manager.js';
import type { ExecutionService } from './services/execution-service.js';
import type { NotificationService } from './services/notification-service.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Log this route's requests at debug level only (the redirect path). */
    quietLogs?: boolean;
  }
}

export interface AppDependencies {
  readonly config: Config;
  readonly routes: RouteTable;
  readonly urlMappings: UrlMappingService;
  readonly visitStats: VisitStatsService;
  /** Export and import of links. */
  readonly linkTransfer: LinkTransferService;
  readonly metrics: Metrics;
  readonly auth: AuthService;
  readonly apiKeys: ApiKeyService;
  readonly userAdmin: UserAdminService;
  readonly runtimeSettings: RuntimeSettings;
  readonly securityMetrics: SecurityMetrics;
  /** With `config.rateLimit.enabled`: counts requests per client and route group. */
  readonly rateLimiter?: RateLimiter;
  readonly rateLimitPolicies?: RateLimitPolicySource;
  /** Every backend in use, for `GET /health/ready`. */
  readonly readiness?: readonly ReadinessCheck[];
  readonly executions: ExecutionService;
  readonly notifications: NotificationService;
  readonly deadLetters: DeadLetterManager;
  /** The process's pino logger (see composition/logger.ts): the app logs to it too. */
  readonly logger: FastifyBaseLogger;
}

const REQUEST_ID = /^[\w.:-]{1,128}$/;

export const OPENAPI_INFO = { title: 'UrlShortener', version: '0.1.0' } as const;

/** One line per request, when it completes; the redirect path logs it only at debug level. */
class RequestLogs extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null, request: FastifyRequest, reply: FastifyReply): void {
    const line = { method: request.method, url: request.url, statusCode: reply.statusCode, ms: reply.elapsedTime };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else if (request.routeOptions.config.quietLogs) {
      if (logsAt(reply.log, 'debug')) reply.log.debug(line, 'request completed');
    } else reply.log.info(line, 'request completed');
  }
}

/**
 * The connection limits (Fastify turns the request and connection timeouts off by default). Node
 * looks for overdue requests every `connectionsCheckingInterval`, 30 s by default: a quarter of
 * the shortest limit here, so a limit is enforced within 25% of its value.
 */
function serverTimeouts(limits: HttpTimeouts) {
  const shortest = Math.min(...[limits.requestTimeoutMs, limits.headersTimeoutMs].filter((ms) => ms > 0), 120_000);
  return {
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionTimeout: limits.connectionTimeoutMs,
    http: {
      requestTimeout: limits.requestTimeoutMs,
      headersTimeout: limits.headersTimeoutMs,
      connectionsCheckingInterval: Math.min(30_000, Math.max(100, Math.floor(shortest / 4))),
    },
  };
}

/** The OpenAPI document (at /openapi.json) and its UI (at /docs), built from the routes' schemas. */
async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        ...OPENAPI_INFO,
        description: 'Short codes that redirect to URLs. Errors are always `{"detail": "…"}`.',
      },
      tags: [
        { name: 'url_mapping', description: 'Create, resolve, list, change and delete short URLs.' },
        { name: 'infrastructure', description: 'Health and operations.' },
        { name: 'auth', description: 'Accounts and cookie sessions (JWT + double-submit CSRF).' },
        { name: 'admin', description: 'Runtime settings and user accounts (administrators).' },
        { name: 'api_keys', description: 'API keys: bearer credentials for scripts and integrations.' },
        { name: 'executions', description: 'Scripts run in the sandbox by the workers.' },
        { name: 'notifications', description: 'Webhook and chat channels told when an execution ends.' },
        { name: 'dead_letters', description: 'Events the consumers gave up on (administrators).' },
      ],
      components: { securitySchemes: SECURITY_SCHEMES },
    },
    transform: documentSecurity,
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    uiConfig: { deepLinking: false },
    staticCSP: true,
    transformStaticCSP: docsCsp,
    uiHooks: { onRequest: (_request, reply, done) => (reply.headers(DOCS_HEADERS), done()) },
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}

/** What the redirect fast path shares with the app's own route, hooks and settings. */
function fastRedirectOptions(deps: AppDependencies, series: RouteSeries, rateLimit: RateLimitHooks | undefined) {
  const { config } = deps;
  return {
    service: deps.urlMappings,
    cacheControl: config.redirect.cacheControl,
    series,
    reservedCodes: () => deps.routes.reservedCodes(),
    logger: deps.logger,
    tracing: config.tracing.enabled,
    rateLimit,
    trustProxy: config.trustProxy !== false,
  };
}

/** The server's options: logging, limits, timeouts, and framework errors answered as `{detail}`. */
function fastifyOptions({ config, logger }: AppDependencies, schemas: SchemaCompilers): FastifyHttpOptions<Server> {
  return {
    loggerInstance: logger,
    logController: new RequestLogs(),
    childLoggerFactory: lazyRequestLogger,
    bodyLimit: config.bodyLimit,
    trustProxy: config.trustProxy,
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    routerOptions: { maxParamLength: 4096 },
    schemaController: schemas.schemaController,
    forceCloseConnections: 'idle',
    ...serverTimeouts(config.http),
    clientErrorHandler,
    frameworkErrors: frameworkErrorHandler(config.bodyLimit),
    // Fastify's own 503 while closing has its own body shape: let the last requests of each
    // connection be served instead (each answer then carries `Connection: close`).
    return503OnClosing: false,
  };
}

/** Builds the HTTP app without listening: the server entry and the tests both use it. */
export async function buildApp(deps: AppDependencies): Promise<FastifyInstance> {
  const { config } = deps;
  const schemas = createSchemaCompilers(SHARED_SCHEMAS);
  const app = Fastify(fastifyOptions(deps, schemas)).withTypeProvider<TypeBoxTypeProvider>();
  schemas.owns(app);

  deps.routes.record(app);
  // These set up each route as it is registered, so they come before every route.
  const routeSeries = registerHttpMetrics(app, deps.metrics);
  registerSecurityHeaders(app);
  requireBodiesByMediaType(app);
  if (config.tracing.enabled) registerRequestTracing(app);
  else registerContextPropagation(app);
  let rateLimit: RateLimitHooks | undefined;
  if (config.rateLimit.enabled && deps.rateLimiter && deps.rateLimitPolicies) {
    rateLimit = registerRateLimiting(app, {
      limiter: deps.rateLimiter,
      policies: deps.rateLimitPolicies,
      metrics: deps.metrics,
      traceDecisions: config.tracing.enabled,
    });
  }
  app.setValidatorCompiler(schemas.validatorCompiler);
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  // JSON only: any other body type answers 415 instead of being read as text.
  app.removeContentTypeParser(['text/plain']);
  registerErrorHandling(app, config.bodyLimit);

  await registerOpenApi(app);

  await app.register(healthRoutes, { readiness: deps.readiness ?? [] });
  await app.register(metricsRoutes, { metrics: deps.metrics });
  // A worker serves only health and metrics; the API is the other roles' business.
  if (config.role !== 'worker') {
    await app.register(urlMappingRoutes, {
      service: deps.urlMappings,
      cacheControl: config.redirect.cacheControl,
      callers: { auth: deps.auth },
    });
    await app.register(apiScope, {
      auth: deps.auth,
      apiKeys: deps.apiKeys,
      userAdmin: deps.userAdmin,
      settings: deps.runtimeSettings,
      securityMetrics: deps.securityMetrics,
      executions: deps.executions,
      notifications: deps.notifications,
      deadLetters: deps.deadLetters,
      urlMappings: deps.urlMappings,
      visitStats: deps.visitStats,
      linkTransfer: deps.linkTransfer,
      importBodyLimit: config.transfer.importBodyLimit,
    });
    await app.register(faviconRoutes);
    await app.register(webAppRoutes);
  }

  deps.routes.registerMethodNotAllowed(app, errors.methodNotAllowed);
  if (config.role !== 'worker' && config.redirect.fastPath) {
    installFastRedirect(app, fastRedirectOptions(deps, routeSeries(REDIRECT_ROUTE), rateLimit));
  }
  return app;
}
