/**
 * Reads the settings from the environment, once, at start-up: every variable is parsed and
 * checked (the rules that span several variables too), every problem reported at once, and the
 * result frozen. No other module reads `process.env`.
 */

import { dirname, join } from 'node:path';
import { isValidEmail, isValidUsername, PASSWORD_MAX_BYTES, passwordLength } from '../domain/user.js';
import { deepFreeze } from '../support/deep-freeze.js';
import { isProblem, SECRET_KEY_MIN_BYTES } from './parsers.js';
import { weakSecretReason } from './secret-strength.js';
import type { Setting } from './setting-declaration.js';
import { rateLimitSettingNames } from './setting-declaration.js';
import { SETTINGS, type SettingName, type SettingValue } from './settings.js';
import type {
  AuthConfig,
  Config,
  DatabaseConfig,
  EventsConfig,
  ExecutionsConfig,
  RateLimitConfig,
  TracingConfig,
} from './types.js';

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Readonly<Record<string, string | undefined>>;

/** Every setting's value; one that is not valid is missing. */
type SettingValues = { readonly [N in SettingName]: SettingValue<N> };

/** Reads and validates every setting; throws a ConfigError naming each bad variable. */
export function loadConfig(env: Env = process.env): Config {
  const problems = new Problems();
  const values = readSettings(env, problems);
  checkRules(values, problems);
  if (problems.list.length > 0) throw new ConfigError(problems.list);
  return deepFreeze(assemble(values as SettingValues));
}

/** What is wrong, each line naming its variable; which variables are not valid. */
class Problems {
  readonly list: string[] = [];
  private readonly invalid = new Set<SettingName>();

  /** `NAME=value: what is wrong`, the value as shown (hidden when secret). */
  invalidValue(name: SettingName, shown: string, problem: string): void {
    this.invalid.add(name);
    this.list.push(`${name}=${shown}: ${problem}`);
  }

  /** `NAME: what is wrong`, for a variable that is missing or wrong with another. */
  about(name: SettingName, problem: string): void {
    this.list.push(`${name}: ${problem}`);
  }

  isInvalid(name: SettingName): boolean {
    return this.invalid.has(name);
  }
}

/** Parses every setting in the table's order, its default where it is not set (or set empty). */
function readSettings(env: Env, problems: Problems): Partial<SettingValues> {
  const values: Record<string, unknown> = {};
  for (const setting of Object.values(SETTINGS) as Setting<unknown, SettingName>[]) {
    const raw = env[setting.name];
    const source = raw === undefined || raw === '' ? setting.default : raw;
    const value = setting.parse(source);
    if (isProblem(value)) {
      problems.invalidValue(setting.name, setting.secret ? '(value hidden)' : JSON.stringify(source), value.problem);
    } else {
      values[setting.name] = value;
    }
  }
  return values as Partial<SettingValues>;
}

/** The rules that span several variables (each needs the values it compares to be valid). */
function checkRules(v: Partial<SettingValues>, problems: Problems): void {
  const { REQUEST_TIMEOUT_MS: request, HEADERS_TIMEOUT_MS: headers } = v;
  if (request !== undefined && headers !== undefined && request > 0 && headers > request) {
    problems.invalidValue(
      'HEADERS_TIMEOUT_MS',
      String(headers),
      `must be at most ${SETTINGS.REQUEST_TIMEOUT_MS.name} (${request})`,
    );
  }
  if (v.NODE_ENV === 'production' && v.SECRET_KEY === undefined && !problems.isInvalid('SECRET_KEY')) {
    problems.about(
      'SECRET_KEY',
      `required when ${SETTINGS.NODE_ENV.name}=production, at least ${SECRET_KEY_MIN_BYTES} bytes and the same on every instance (e.g. \`openssl rand -base64 48\`)`,
    );
  }
  const weakness = v.NODE_ENV === 'production' && v.SECRET_KEY !== undefined && weakSecretReason(v.SECRET_KEY);
  if (weakness) {
    problems.invalidValue(
      'SECRET_KEY',
      '(value hidden)',
      `too weak for ${SETTINGS.NODE_ENV.name}=production: it ${weakness}; use a random key (e.g. \`openssl rand -base64 48\`)`,
    );
  }
  const rounds = v.BCRYPT_ROUNDS;
  if (rounds !== undefined && rounds < 10 && v.NODE_ENV !== 'test') {
    problems.invalidValue(
      'BCRYPT_ROUNDS',
      String(rounds),
      `must be at least 10 (values down to 4 are allowed only with ${SETTINGS.NODE_ENV.name}=test)`,
    );
  }
  if (v.ADMIN_USERNAME !== undefined) checkAdmin(v, v.ADMIN_USERNAME, problems);
}

/** The start-up administrator: a valid username, email and password, all three. */
function checkAdmin(v: Partial<SettingValues>, username: string, problems: Problems): void {
  const required = `required with ${SETTINGS.ADMIN_USERNAME.name}`;
  if (!isValidUsername(username)) {
    problems.invalidValue(
      'ADMIN_USERNAME',
      JSON.stringify(username),
      "must be 3 to 32 of letters, digits, '_', '.', '-'",
    );
  }
  if (v.ADMIN_EMAIL === undefined || !isValidEmail(v.ADMIN_EMAIL.toLowerCase())) {
    problems.about('ADMIN_EMAIL', `a valid email address is ${required}`);
  }
  const password = v.ADMIN_PASSWORD;
  const minLength = v.PASSWORD_MIN_LENGTH;
  if (password === undefined) problems.about('ADMIN_PASSWORD', required);
  else if (Buffer.byteLength(password, 'utf8') > PASSWORD_MAX_BYTES) {
    problems.about('ADMIN_PASSWORD', `must be at most ${PASSWORD_MAX_BYTES} bytes`);
  } else if (minLength !== undefined && passwordLength(password) < minLength) {
    problems.about('ADMIN_PASSWORD', `must be at least ${minLength} characters (${SETTINGS.PASSWORD_MIN_LENGTH.name})`);
  }
}

/** The typed configuration from valid values. */
function assemble(v: SettingValues): Config {
  const database = databaseConfig(v);
  return {
    nodeEnv: v.NODE_ENV,
    host: v.HOST,
    port: v.PORT,
    logLevel: v.LOG_LEVEL,
    bodyLimit: v.BODY_LIMIT,
    trustProxy: v.TRUST_PROXY,
    shutdownTimeoutMs: v.SHUTDOWN_TIMEOUT_MS,
    http: {
      requestTimeoutMs: v.REQUEST_TIMEOUT_MS,
      headersTimeoutMs: v.HEADERS_TIMEOUT_MS,
      keepAliveTimeoutMs: v.KEEP_ALIVE_TIMEOUT_MS,
      connectionTimeoutMs: v.CONNECTION_TIMEOUT_MS,
    },
    database,
    urls: { maxLength: v.URL_MAX_LENGTH, allowedSchemes: v.URL_ALLOWED_SCHEMES },
    links: { codeLength: v.CODE_LENGTH, writePolicy: v.LINK_WRITE_POLICY },
    transfer: { importBodyLimit: v.IMPORT_BODY_LIMIT },
    redirect: {
      cacheControl: v.REDIRECT_CACHE_CONTROL,
      fastPath: v.REDIRECT_FAST_PATH,
      cacheMaxEntries: v.CACHE_MAX_ENTRIES,
      cacheTtlMs: v.CACHE_TTL_MS,
      clickFlushIntervalMs: v.CLICK_FLUSH_INTERVAL_MS,
      clickCompactIntervalMs: v.CLICK_COMPACT_INTERVAL_MS,
    },
    visits: {
      recording: v.VISIT_RECORDING,
      flushIntervalMs: v.VISIT_FLUSH_INTERVAL_MS ?? v.CLICK_FLUSH_INTERVAL_MS,
      retentionDays: v.VISIT_RETENTION_DAYS,
      retentionIntervalMs: v.VISIT_RETENTION_INTERVAL_MS,
      countryHeader: v.VISIT_COUNTRY_HEADER,
      countBots: v.COUNT_BOTS,
    },
    redisUrl: v.REDIS_URL,
    redisKeyPrefix: v.REDIS_KEY_PREFIX,
    redisTimeoutMs: v.REDIS_TIMEOUT_MS,
    auth: authConfig(v, database),
    tracing: tracingConfig(v),
    rateLimit: rateLimitConfig(v),
    events: eventsConfig(v),
    role: v.ROLE,
    workers: v.WORKERS,
    sandbox: { memoryBytes: v.SANDBOX_MEMORY_MB * 1024 * 1024, outputBytes: 64 * 1024 },
    executions: executionsConfig(v),
    notifications: {
      allowPrivate: v.NOTIFICATIONS_ALLOW_PRIVATE,
      timeoutMs: v.NOTIFICATION_TIMEOUT_MS,
      maxChannelsPerUser: v.NOTIFICATION_MAX_CHANNELS_PER_USER,
    },
    loginThrottle: { maxFailures: v.LOGIN_ADDRESS_MAX_FAILURES, windowMs: v.LOGIN_ADDRESS_WINDOW_MINUTES * 60_000 },
  };
}

/** SQLite always on one connection; PostgreSQL with its pool and its connection and start deadlines. */
function databaseConfig(v: SettingValues): DatabaseConfig {
  const database = v.DATABASE_URL;
  if (database.kind === 'sqlite') return { ...database, poolMax: 1 };
  return {
    ...database,
    poolMax: v.DB_POOL_MAX,
    connectTimeoutMs: v.DB_CONNECT_TIMEOUT_MS,
    startTimeoutMs: v.DB_START_TIMEOUT_MS,
    idleInTransactionTimeoutMs: v.DB_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    unansweredCheckMs: v.DB_UNANSWERED_CHECK_MS,
  };
}

function authConfig(v: SettingValues, database: DatabaseConfig): AuthConfig {
  return {
    secretKey: v.SECRET_KEY,
    secretKeyFile: v.SECRET_KEY_FILE ?? generatedKeyFile(database),
    accessTokenMinutes: v.ACCESS_TOKEN_EXPIRE_MINUTES,
    bcryptRounds: v.BCRYPT_ROUNDS,
    admin: { username: v.ADMIN_USERNAME, email: v.ADMIN_EMAIL, password: v.ADMIN_PASSWORD },
    defaults: {
      password_min_length: v.PASSWORD_MIN_LENGTH,
      max_login_attempts: v.MAX_LOGIN_ATTEMPTS,
      lockout_duration_minutes: v.LOCKOUT_DURATION_MINUTES,
    },
  };
}

/** Where a generated key is kept by default: beside the SQLite file; none for an in-memory database. */
function generatedKeyFile(database: DatabaseConfig): string | undefined {
  if (database.kind === 'postgres') return join('data', 'secret_key');
  return database.url === ':memory:' ? undefined : join(dirname(database.url), 'secret_key');
}

function tracingConfig(v: SettingValues): TracingConfig {
  const otlpEndpoint = v.OTEL_EXPORTER_OTLP_ENDPOINT;
  // `auto`: record everything when there is somewhere to send it, else nothing.
  const samplingRate = v.TRACING_SAMPLING_RATE ?? (otlpEndpoint === undefined ? 0 : 1);
  return {
    enabled: !v.OTEL_SDK_DISABLED && samplingRate > 0,
    serviceName: v.OTEL_SERVICE_NAME,
    otlpEndpoint,
    sampler: v.TRACING_SAMPLER,
    samplingRate,
    targetTracesPerSecond: v.TRACING_TARGET_TRACES_PER_SECOND,
  };
}

function rateLimitConfig(v: SettingValues): RateLimitConfig {
  const policy = (group: Parameters<typeof rateLimitSettingNames>[0]) => {
    const names = rateLimitSettingNames(group);
    return { limit: v[names.limit], windowSeconds: v[names.window] };
  };
  return {
    enabled: v.RATE_LIMIT_ENABLED,
    algorithm: v.RATE_LIMIT_ALGORITHM,
    policies: {
      auth: policy('auth'),
      writes: policy('writes'),
      redirects: policy('redirects'),
      default: policy('default'),
    },
  };
}

function eventsConfig(v: SettingValues): EventsConfig {
  return {
    natsUrl: v.NATS_URL,
    natsPrefix: v.NATS_PREFIX,
    partitions: v.EVENT_PARTITIONS,
    handlerAttempts: v.EVENT_HANDLER_ATTEMPTS,
    retryBackoffMs: v.EVENT_RETRY_BACKOFF_MS,
    retryMaxBackoffMs: v.EVENT_RETRY_MAX_BACKOFF_MS,
    dlqMaxRetries: v.DLQ_MAX_RETRIES,
    dlqRetryDelayMs: v.DLQ_RETRY_DELAY_MS,
    retentionMs: v.EVENT_RETENTION_DAYS * 86_400_000,
    pollMs: v.EVENT_POLL_MS,
    leaseMs: v.EVENT_LEASE_MS,
    ackWaitMs: v.NATS_ACK_WAIT_MS,
    maxEventBytes: v.EVENT_MAX_BYTES,
  };
}

function executionsConfig(v: SettingValues): ExecutionsConfig {
  const concurrency = v.EXECUTION_CONCURRENCY;
  // `auto`: all threads but one (at least one), so one user's long scripts never make another's wait.
  const maxThreadsPerUser = v.EXECUTION_MAX_THREADS_PER_USER ?? Math.max(1, concurrency - 1);
  return {
    concurrency,
    maxThreadsPerUser: Math.min(maxThreadsPerUser, concurrency),
    maxPendingPerUser: v.EXECUTION_MAX_PENDING_PER_USER,
    ackWaitMs: v.EXECUTION_ACK_WAIT_MS,
    nice: v.SANDBOX_NICE,
  };
}
