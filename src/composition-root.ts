import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { buildApp } from './app.js';
import type { Config } from './config/config.js';
import { type Database, openDatabase } from './adapters/storage/database.js';
import { KyselyUrlMappingRepository } from './adapters/storage/kysely-url-mapping-repository.js';
import { migrateToLatest } from './adapters/storage/migrations.js';
import { createMetrics, type Metrics } from './adapters/telemetry/metrics.js';
import { registerRedirectCacheMetrics } from './adapters/telemetry/redirect-cache-metrics.js';
import { RouteTable } from './http/route-table.js';
import { ClickBuffer } from './services/click-buffer.js';
import { RedirectCache } from './services/redirect-cache.js';
import { UrlMappingService } from './services/url-mapping-service.js';
import { BcryptPasswordHasher } from './adapters/auth/bcrypt-password-hasher.js';
import { CsrfTokens } from './adapters/auth/csrf.js';
import { JwtCodec } from './adapters/auth/jwt.js';
import { resolveSecretKey } from './adapters/auth/secret-key.js';
import { createSecurityMetrics } from './adapters/auth/security-metrics.js';
import { MemoryCounters } from './adapters/counters/memory-counters.js';
import { RedisCounters } from './adapters/counters/redis-counters.js';
import { RedisAuthStateStore } from './adapters/redis/redis-auth-state-store.js';
import { RedisLink } from './adapters/redis/redis-link.js';
import { KyselyAuthStateStore } from './adapters/storage/kysely-auth-state-store.js';
import type { AuthStateStore } from './ports/auth-state-store.js';
import { PeriodicTask } from './services/periodic-task.js';
import { KyselySettingsRepository } from './adapters/storage/kysely-settings-repository.js';
import { KyselyUserRepository } from './adapters/storage/kysely-user-repository.js';
import { AUTH_SETTINGS, RATE_LIMIT_SETTINGS } from './domain/settings.js';
import { type Clock, systemClock } from './ports/clock.js';
import type { Counters } from './ports/counters.js';
import { AuthService } from './services/auth-service.js';
import { RuntimeSettings } from './services/runtime-settings.js';
import { MemoryRateLimiter } from './adapters/rate-limit/memory-rate-limiter.js';
import { RedisRateLimiter } from './adapters/rate-limit/redis-rate-limiter.js';
import { KyselyTracingPlugin } from './adapters/telemetry/kysely-tracing-plugin.js';
import type { RateLimiter } from './ports/rate-limiter.js';
import type { ReadinessCheck } from './ports/readiness-check.js';
import { RateLimitPolicies } from './services/rate-limit-policies.js';
import { QuickJsSandbox } from './adapters/sandbox/quickjs-sandbox.js';
import { KyselyExecutionRepository } from './adapters/storage/kysely-execution-repository.js';
import { KyselyNotificationRepository } from './adapters/storage/kysely-notification-repository.js';
import { type BackgroundLogger, lateLogger } from './adapters/logging/late-logger.js';
import { CONSUMER_BATCH, composeEventBackbone, type EventBackbone } from './composition-events.js';
import { cacheInvalidationConsumer } from './consumers/cache-invalidation.js';
import { eventStoreConsumer } from './consumers/event-store.js';
import { executorConsumer } from './consumers/executor.js';
import { notificationFanOut, notificationSender } from './consumers/notifier.js';
import { executionEvents } from './domain/execution.js';
import { urlEvents } from './domain/url-events.js';
import type { ConsumerDefinition } from './services/consumer-runner.js';
import { ExecutionService } from './services/execution-service.js';
import { NotificationService } from './services/notification-service.js';

export interface Service {
  readonly app: FastifyInstance;
  readonly database: Database;
  readonly clicks: ClickBuffer;
  readonly auth: AuthService;
  readonly counters: Counters;
  readonly runtimeSettings: RuntimeSettings;
  /** The rate-limit policies in force; `apply()` runtime settings to change them. */
  readonly rateLimitPolicies: RateLimitPolicies;
  /** The event backbone: bus, outbox relay, dead letters. */
  readonly events: EventBackbone;
  readonly executions: ExecutionService;
  /** Stops serving, writes buffered clicks, closes the pools. Idempotent. */
  close(): Promise<void>;
}

export interface ComposeOptions {
  readonly logger?: FastifyServerOptions['logger'];
  /** Time for tokens, lockouts, memory counters and the memory rate limiter; tests move it forward instead of sleeping. */
  readonly clock?: Clock;
  /** How often each instance polls for runtime-settings changes (default 250 ms; within 1 s is promised). */
  readonly settingsPollIntervalMs?: number;
}

/** How often expired revocations and login failures are deleted from the database. */
const AUTH_STATE_PRUNE_INTERVAL_MS = 60_000;

/**
 * State every instance must agree on: Redis when configured (counters, and a fast copy of the
 * revocations and lockouts), the revocations and lockouts recorded in the database, and their pruning.
 */
function composeSharedState(config: Config, database: Database, clock: Clock, log: BackgroundLogger) {
  const redis = config.redisUrl
    ? new RedisLink({ url: config.redisUrl, timeoutMs: config.redisTimeoutMs, logger: log })
    : undefined;
  const counters: Counters = redis
    ? new RedisCounters(redis.connect('counters'), config.redisKeyPrefix, redis)
    : new MemoryCounters(clock);
  // Recorded in the database (kept across restarts); Redis holds a fast copy, rebuilt when it comes back.
  const durableState = new KyselyAuthStateStore(database.db, clock);
  const redisState = redis
    ? new RedisAuthStateStore(durableState, redis.connect('auth-state'), {
        keyPrefix: config.redisKeyPrefix,
        calls: redis,
        clock,
        onRebuildFailed: (error) => log.warn({ err: error }, 'rebuilding the Redis copy of revocations failed'),
      })
    : undefined;
  redis?.onBack(() => void redisState?.rebuild().catch(() => undefined));
  const authState: AuthStateStore = redisState ?? durableState;
  const pruning = new PeriodicTask('auth state pruning', AUTH_STATE_PRUNE_INTERVAL_MS, () => authState.prune(), log);
  const close = async () => {
    await pruning.stop();
    await redisState?.close();
    await redis?.close();
    await counters.close();
  };
  return { redis, counters, authState, pruning, close };
}

/** The account side: shared state, runtime settings, users, tokens, and the ADMIN_* administrator. */
async function composeAccounts(
  config: Config,
  database: Database,
  metrics: Metrics,
  log: BackgroundLogger,
  options: ComposeOptions,
) {
  const clock = options.clock ?? systemClock;
  // Shared Redis when configured, so lockouts, revocations and setting changes reach every instance.
  const { redis, counters, authState, pruning, close } = composeSharedState(config, database, clock, log);
  try {
    const runtimeSettings = new RuntimeSettings({
      // Account settings and rate-limit values (design: admin settings), env values until changed.
      definitions: [...Object.values(AUTH_SETTINGS), ...RATE_LIMIT_SETTINGS],
      defaults: { ...config.auth.defaults, ...RateLimitPolicies.defaults(config.rateLimit) },
      repository: new KyselySettingsRepository(database.db),
      counters,
      clock,
      pollIntervalMs: options.settingsPollIntervalMs ?? 250,
      logger: log,
    });
    await runtimeSettings.start();
    pruning.start();
    const secretKey = resolveSecretKey(config.auth);
    const securityMetrics = createSecurityMetrics(metrics.registry);
    const auth = new AuthService({
      users: new KyselyUserRepository(database.db),
      passwords: new BcryptPasswordHasher(config.auth.bcryptRounds),
      state: authState,
      settings: runtimeSettings,
      tokens: new JwtCodec(secretKey, clock),
      csrf: new CsrfTokens(secretKey),
      clock,
      metrics: securityMetrics,
      accessTokenMinutes: config.auth.accessTokenMinutes,
    });
    const { username, email, password } = config.auth.admin;
    const adminCreated =
      username !== undefined && email !== undefined && password !== undefined
        ? await auth.ensureAdmin({ username, email, password })
        : false;
    return {
      redis,
      counters,
      runtimeSettings,
      securityMetrics,
      auth,
      adminCreated: adminCreated ? username : undefined,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Calls `log` at most once per 10 s: a restart breaks every pooled connection at once. */
function everyFewSeconds(log: (error: Error) => void): (error: Error) => void {
  let last = -Infinity;
  return (error) => {
    const now = performance.now();
    if (now - last < 10_000) return;
    last = now;
    log(error);
  };
}

/** How often a SQLite database's WAL is checkpointed in the background. */
const SQLITE_CHECKPOINT_INTERVAL_MS = 100;

/** How long "no such code" is cached: a code created elsewhere shows up here within this even without its event. */
const UNKNOWN_CODE_TTL_MS = 1000;

/** The one place that picks adapters from the configuration and wires the service together. */
export async function compose(config: Config, options: ComposeOptions = {}): Promise<Service> {
  // One span per SQL statement when tracing is on; nothing in the way when it is off.
  const databaseTracing = config.tracing.enabled
    ? new KyselyTracingPlugin({ dialect: config.database.kind })
    : undefined;
  const log = lateLogger();
  const database = openDatabase(config.database, {
    ...(databaseTracing ? { plugins: [databaseTracing], log: databaseTracing.log } : {}),
    // SQLite: the WAL is copied into the database file off the event loop.
    checkpointIntervalMs: SQLITE_CHECKPOINT_INTERVAL_MS,
    onConnectionLost: everyFewSeconds((error) =>
      log.warn({ err: error.message }, 'database connection lost; the pool opens a new one when next needed'),
    ),
  });
  try {
    await migrateToLatest(database.db, database.dialect);
  } catch (error) {
    await database.close();
    throw error;
  }
  const metrics = createMetrics();
  const serviceName = config.tracing.serviceName;
  let backbone: EventBackbone;
  try {
    backbone = await composeEventBackbone(config.events, serviceName, database, metrics.registry, log);
  } catch (error) {
    await database.close();
    throw error;
  }
  const urlEventFactory = urlEvents(serviceName);
  const repository = new KyselyUrlMappingRepository(database.db, database.dialect, backbone.outbox, database.reader);
  const routes = new RouteTable();
  const cache = new RedirectCache(config.redirect.cacheMaxEntries, config.redirect.cacheTtlMs, UNKNOWN_CODE_TTL_MS);
  registerRedirectCacheMetrics(metrics.registry, cache.lookups);

  const clicks = new ClickBuffer(
    repository,
    {
      flushIntervalMs: config.redirect.clickFlushIntervalMs,
      compactIntervalMs: config.redirect.clickCompactIntervalMs,
    },
    urlEventFactory.clicked,
  );
  const urlMappings = new UrlMappingService(repository, cache, clicks, {
    rules: config.urls,
    reservedCodes: () => routes.reservedCodes(),
    events: urlEventFactory,
  });
  const executionRepository = new KyselyExecutionRepository(database.db, database.dialect, backbone.outbox);
  const executionEventFactory = executionEvents(serviceName);
  const executions = new ExecutionService(executionRepository, executionEventFactory, {
    maxPendingPerUser: config.executions.maxPendingPerUser,
  });
  const notificationRepository = new KyselyNotificationRepository(database.db, backbone.outbox);
  const notifications = new NotificationService(notificationRepository, {
    allowPrivate: config.notifications.allowPrivate,
  });
  let accounts: Awaited<ReturnType<typeof composeAccounts>>;
  try {
    accounts = await composeAccounts(config, database, metrics, log, options);
  } catch (error) {
    await backbone.close();
    await database.close();
    throw error;
  }
  const { auth, counters, runtimeSettings, securityMetrics, redis } = accounts;
  // Shared Redis when configured, so every instance counts against the same limits.
  const rateLimiter: RateLimiter = redis
    ? new RedisRateLimiter(redis.connect('rate-limit'), { keyPrefix: config.redisKeyPrefix, calls: redis })
    : new MemoryRateLimiter(options.clock ? { now: () => options.clock!.now() } : {});
  const rateLimitPolicies = new RateLimitPolicies(config.rateLimit);
  // The stored rate-limit settings now, and every change from any instance from now on.
  rateLimitPolicies.follow(runtimeSettings);
  const readiness: ReadinessCheck[] = [
    { name: 'database', check: () => database.ping() },
    {
      name: config.events.natsUrl ? 'nats' : 'event_log',
      check: () => backbone.bus.ping(),
      detail: () => backbone.backlog(),
    },
  ];
  if (redis) readiness.push({ name: 'redis', check: () => redis.ping() });

  // What runs in this process: the API's consumers and the worker's.
  const worker = config.role !== 'api';
  const sandbox = worker ? new QuickJsSandbox(config.executions.concurrency) : undefined;
  const consumers: ConsumerDefinition[] = [];
  if (config.role !== 'worker') consumers.push(cacheInvalidationConsumer(cache));
  if (sandbox) {
    consumers.push(
      eventStoreConsumer(database.db, {
        batchSize: CONSUMER_BATCH,
        maxWaitMs: 20,
        transactions: backbone.transactions,
      }),
      backbone.deadLetters.consumer(),
      executorConsumer(executionRepository, sandbox, executionEventFactory, {
        ...config.sandbox,
        maxThreadsPerUser: config.executions.maxThreadsPerUser,
        // Room to see other users' requests while one user's wait for a thread.
        window: config.executions.concurrency + config.executions.maxPendingPerUser,
        ackWaitMs: config.executions.ackWaitMs,
      }),
      notificationFanOut(notificationRepository, serviceName),
      notificationSender(notificationRepository, config.notifications, metrics.registry),
    );
  }

  // Each step runs even when an earlier one failed (a database already gone, a broker away).
  const shutdown = async (app?: FastifyInstance) => {
    const steps: [string, () => Promise<unknown> | undefined][] = [
      ['http', () => app?.close()],
      ['click flush', () => clicks.stop()],
      ['event backbone', () => backbone.close()],
      ['sandbox', () => sandbox?.close()],
      ['runtime settings', () => runtimeSettings.stop()],
      ['accounts', () => accounts.close()],
      ['rate limiter', () => rateLimiter.close()],
      ['database', () => database.close()],
    ];
    for (const [name, step] of steps) {
      try {
        await step();
      } catch (error) {
        log.error({ err: error, step: name }, 'shutdown step failed');
      }
    }
  };
  let app: FastifyInstance;
  try {
    app = await buildApp({
      config,
      routes,
      urlMappings,
      metrics,
      auth,
      runtimeSettings,
      securityMetrics,
      rateLimiter,
      rateLimitPolicies,
      readiness,
      executions,
      notifications,
      deadLetters: backbone.deadLetters,
      logger: options.logger,
    });
    log.attach(app.log);
    if (accounts.adminCreated)
      log.info({ username: accounts.adminCreated }, 'administrator created from ADMIN_USERNAME');
    clicks.start(app.log);
    await backbone.start(consumers, { prune: worker });
  } catch (error) {
    await shutdown();
    throw error;
  }

  let closing: Promise<void> | undefined;
  const close = () => (closing ??= shutdown(app));
  return {
    app,
    database,
    clicks,
    auth,
    counters,
    runtimeSettings,
    rateLimitPolicies,
    events: backbone,
    executions,
    close,
  };
}
