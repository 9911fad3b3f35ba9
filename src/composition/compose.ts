import type { FastifyInstance } from 'fastify';
import { QuickJsSandbox } from '../adapters/sandbox/quickjs-sandbox.js';
import type { Database } from '../adapters/storage/database.js';
import { createMetrics } from '../adapters/telemetry/metrics.js';
import { buildApp } from '../app.js';
import type { Config } from '../config/config.js';
import { type Clock, systemClock } from '../ports/clock.js';
import type { Counters } from '../ports/counters.js';
import type { ReadinessCheck } from '../ports/readiness-check.js';
import type { AuthService } from '../services/auth-service.js';
import type { ExecutionService } from '../services/execution-service.js';
import type { LinkTransferService } from '../services/link-transfer-service.js';
import type { RateLimitPolicies } from '../services/rate-limit-policies.js';
import type { RuntimeSettings } from '../services/runtime-settings.js';
import type { ClickBuffer } from '../support/click-buffer.js';
import { composeAccounts } from './accounts.js';
import { apiConsumers, workerConsumers } from './consumers.js';
import type { CompositionContext } from './context.js';
import { DisposerStack } from './disposer-stack.js';
import { composeEventBackbone, type EventBackbone } from './event-backbone.js';
import { composeExecutions } from './executions.js';
import { createLogger, type LoggerChoice } from './logger.js';
import { composeSharedState, type SharedState } from './shared-state.js';
import { openStorage } from './storage.js';
import { composeUrlMappings } from './url-mappings.js';
import type { Visits } from './visits.js';

export interface Service {
  readonly app: FastifyInstance;
  readonly database: Database;
  readonly clicks: ClickBuffer;
  /** Visit recording, retention and statistics (issue 15). */
  readonly visits: Visits;
  /** Export and import of links (`urlshortener export` / `import` use it too). */
  readonly linkTransfer: LinkTransferService;
  readonly auth: AuthService;
  readonly counters: Counters;
  readonly runtimeSettings: RuntimeSettings;
  /** The rate-limit policies in force; `apply()` runtime settings to change them. */
  readonly rateLimitPolicies: RateLimitPolicies;
  /** The event backbone: bus, outbox relay, dead letters. */
  readonly events: EventBackbone;
  readonly executions: ExecutionService;
  /**
   * Stops serving, then closes what was opened in reverse: HTTP, the click flush, the event
   * backbone, the sandbox, runtime settings, the shared state, the rate limiter, the database.
   * Idempotent.
   */
  close(): Promise<void>;
}

export interface ComposeOptions {
  /** `false` silences every log line (tests); pino options or a pino logger replace LOG_LEVEL's. */
  readonly logger?: LoggerChoice;
  /** Time for tokens, lockouts, memory counters and the memory rate limiter; tests move it forward instead of sleeping. */
  readonly clock?: Clock;
  /** How often each instance polls for runtime-settings changes (default 250 ms; within 1 s is promised). */
  readonly settingsPollIntervalMs?: number;
  /**
   * `false`: no event consumers and no background indexing start (the command line's import and
   * export, which use the database and the outbox only; a server indexes what they wrote); they
   * start by default.
   */
  readonly background?: boolean;
}

/** What `GET /health/ready` checks: every backend in use. */
function readinessChecks(config: Config, database: Database, backbone: EventBackbone, shared: SharedState) {
  const checks: ReadinessCheck[] = [
    { name: 'database', check: () => database.ping() },
    {
      name: config.events.natsUrl ? 'nats' : 'event_log',
      check: () => backbone.bus.ping(),
      detail: () => backbone.backlog(),
    },
  ];
  const { redis } = shared;
  if (redis) checks.push({ name: 'redis', check: () => redis.ping() });
  return checks;
}

/**
 * The one place that picks adapters from the configuration and wires the service together. Each
 * part registers its close on one stack as it opens, in the order that makes the stack unwind as
 * a graceful shutdown must: HTTP first, the database last. A failure part-way closes what opened.
 */
export async function compose(config: Config, options: ComposeOptions = {}): Promise<Service> {
  const logger = createLogger(config, options.logger);
  const stack = new DisposerStack(logger);
  const context: CompositionContext = {
    config,
    logger,
    stack,
    metrics: createMetrics(),
    clock: options.clock ?? systemClock,
    givenClock: options.clock,
  };
  try {
    return await composeService(context, options);
  } catch (error) {
    await stack.dispose();
    throw error;
  }
}

/** The worker's sandbox threads (not in an `api` process), at SANDBOX_NICE. */
function composeSandbox({ config, logger, stack }: CompositionContext): QuickJsSandbox {
  const { concurrency, nice } = config.executions;
  return stack.use('sandbox', new QuickJsSandbox(concurrency, { nice, onWarning: (message) => logger.warn(message) }));
}

async function composeService(context: CompositionContext, options: ComposeOptions): Promise<Service> {
  const { config, logger, stack, metrics } = context;
  const database = await openStorage(context);
  // Shared Redis when configured, so limits, lockouts, revocations and setting changes reach every instance.
  const shared = composeSharedState(context, database);
  const accounts = await composeAccounts(context, database, shared, options.settingsPollIntervalMs);
  // What runs in this process: the API, the worker, or both.
  const sandbox = config.role !== 'api' ? composeSandbox(context) : undefined;
  const backbone = composeEventBackbone(context, database);
  const urlMappings = composeUrlMappings(context, database, backbone, accounts.runtimeSettings, {
    background: options.background !== false,
  });
  const executions = composeExecutions(context, database, backbone);

  const app = await buildApp({
    config,
    routes: urlMappings.routes,
    urlMappings: urlMappings.service,
    visitStats: urlMappings.visits.stats,
    linkTransfer: urlMappings.transfer,
    metrics,
    auth: accounts.auth,
    apiKeys: accounts.apiKeys,
    userAdmin: accounts.userAdmin,
    runtimeSettings: accounts.runtimeSettings,
    securityMetrics: accounts.securityMetrics,
    rateLimiter: shared.rateLimiter,
    rateLimitPolicies: accounts.rateLimitPolicies,
    readiness: readinessChecks(config, database, backbone, shared),
    executions: executions.service,
    notifications: executions.notifications,
    deadLetters: backbone.deadLetters,
    logger,
  });
  stack.defer('http', () => app.close());
  urlMappings.clicks.start(logger);
  await backbone.start(
    options.background === false
      ? []
      : [
          ...(config.role !== 'worker' ? apiConsumers(urlMappings.cache) : []),
          ...(sandbox ? workerConsumers(context, backbone, executions, sandbox) : []),
        ],
    { prune: sandbox !== undefined && options.background !== false },
  );

  return {
    app,
    database,
    clicks: urlMappings.clicks,
    visits: urlMappings.visits,
    linkTransfer: urlMappings.transfer,
    auth: accounts.auth,
    counters: shared.counters,
    runtimeSettings: accounts.runtimeSettings,
    rateLimitPolicies: accounts.rateLimitPolicies,
    events: backbone,
    executions: executions.service,
    close: () => stack.dispose(),
  };
}
