/**
 * Configuration: read once from the environment at start-up, validated, typed and frozen.
 * No other module reads `process.env`.
 *
 * Every setting is declared once in `SETTINGS`; the README's configuration table is generated
 * from it (`urlshortener config --markdown`), so docs and code cannot drift apart.
 */

import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { AUTH_SETTINGS, type AuthSettingValues } from '../domain/settings.js';
import { isValidEmail, isValidUsername, PASSWORD_MAX_BYTES, passwordLength } from '../domain/user.js';

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface DatabaseConfig {
  readonly kind: 'sqlite' | 'postgres';
  /** For sqlite: the file path (or `:memory:`); for postgres: the connection string. */
  readonly url: string;
  readonly poolMax: number;
  /** PostgreSQL: how long a query may wait for a connection before it fails (503). */
  readonly connectTimeoutMs?: number;
}

export interface Config {
  readonly nodeEnv: string;
  readonly host: string;
  readonly port: number;
  readonly logLevel: LogLevel;
  readonly bodyLimit: number;
  readonly trustProxy: boolean;
  readonly shutdownTimeoutMs: number;
  readonly http: HttpTimeouts;
  readonly database: DatabaseConfig;
  readonly urls: {
    readonly maxLength: number;
    readonly allowedSchemes: readonly string[];
  };
  readonly redirect: {
    readonly cacheControl: string;
    readonly cacheMaxEntries: number;
    readonly cacheTtlMs: number;
    readonly clickFlushIntervalMs: number;
    readonly clickCompactIntervalMs: number;
  };
  /** `redis://…` when a shared Redis is in use (counters, rate limits); undefined: in-process memory. */
  readonly redisUrl: string | undefined;
  /** Prepended to every Redis key, so several deployments (or test runs) can share one Redis. */
  readonly redisKeyPrefix: string;
  /** Deadline of every Redis command; beyond it Redis counts as away. */
  readonly redisTimeoutMs: number;
  readonly auth: AuthConfig;
  readonly tracing: TracingConfig;
  readonly rateLimit: RateLimitConfig;
  readonly events: EventsConfig;
  readonly role: Role;
  readonly sandbox: { readonly memoryBytes: number; readonly outputBytes: number };
  readonly executions: ExecutionsConfig;
  readonly notifications: { readonly allowPrivate: boolean; readonly timeoutMs: number };
}

/** How long a client may hold a connection; 0 turns a limit off. */
export interface HttpTimeouts {
  /** The whole request, headers and body, must arrive within this (else 408 and the connection closes). */
  readonly requestTimeoutMs: number;
  /** The request headers must arrive within this; at most `requestTimeoutMs`. */
  readonly headersTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  readonly keepAliveTimeoutMs: number;
  /** A connection on which nothing is received or sent for this long is closed. */
  readonly connectionTimeoutMs: number;
}

export type TracingSamplerKind = 'ratio' | 'adaptive';

export interface TracingConfig {
  /** False when `OTEL_SDK_DISABLED=true` or the sampling rate is 0: no SDK, no hooks, no spans. */
  readonly enabled: boolean;
  readonly serviceName: string;
  /** OTLP/HTTP base URL (`/v1/traces` is appended); undefined: spans are processed, then dropped. */
  readonly otlpEndpoint: string | undefined;
  readonly sampler: TracingSamplerKind;
  /** 0 to 1: the ratio sampler's probability, and the adaptive sampler's ceiling. */
  readonly samplingRate: number;
  readonly targetTracesPerSecond: number;
}

export type RateLimitAlgorithmName = 'token_bucket' | 'sliding_window';
export const RATE_LIMIT_GROUPS = ['auth', 'writes', 'redirects', 'default'] as const;
export type RateLimitGroup = (typeof RATE_LIMIT_GROUPS)[number];

export interface RateLimitConfig {
  readonly enabled: boolean;
  readonly algorithm: RateLimitAlgorithmName;
  /** Requests admitted per window, per client (address, or user when signed in), per route group. */
  readonly policies: Readonly<Record<RateLimitGroup, { readonly limit: number; readonly windowSeconds: number }>>;
}

export interface AuthConfig {
  /** SECRET_KEY; undefined: a generated key kept in `secretKeyFile`. */
  readonly secretKey: string | undefined;
  /** Where a generated key is kept; undefined (in-memory SQLite): only in memory. */
  readonly secretKeyFile: string | undefined;
  readonly accessTokenMinutes: number;
  readonly bcryptRounds: number;
  /** The administrator created at start-up when ADMIN_USERNAME is set. */
  readonly admin: {
    readonly username: string | undefined;
    readonly email: string | undefined;
    readonly password: string | undefined;
  };
  /** Runtime settings in force until an administrator changes them. */
  readonly defaults: AuthSettingValues;
}

export const ROLES = ['all', 'api', 'worker'] as const;
export type Role = (typeof ROLES)[number];

export interface EventsConfig {
  /** NATS JetStream when set; otherwise the embedded log. */
  readonly natsUrl: string | undefined;
  readonly natsPrefix: string;
  readonly partitions: number;
  readonly handlerAttempts: number;
  readonly retryBackoffMs: number;
  readonly retryMaxBackoffMs: number;
  readonly dlqMaxRetries: number;
  readonly dlqRetryDelayMs: number;
  readonly retentionMs: number;
  readonly pollMs: number;
  readonly leaseMs: number;
  readonly ackWaitMs: number;
  /** Largest event envelope a change may record (JSON, UTF-8 bytes). */
  readonly maxEventBytes: number;
}

export interface ExecutionsConfig {
  /** Sandbox threads of one worker: scripts it runs at once. */
  readonly concurrency: number;
  /** Of those, how many one user's executions may hold at once. */
  readonly maxThreadsPerUser: number;
  /** Queued and running executions one user may have (POST /execute answers 429 beyond). */
  readonly maxPendingPerUser: number;
  /** Silence after which a worker's executions pass to another (heartbeats every third of it). */
  readonly ackWaitMs: number;
}

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Env = Readonly<Record<string, string | undefined>>;

interface Setting<T> {
  readonly name: string;
  readonly default: string;
  readonly description: string;
  /** Returns the parsed value, or a string saying what is wrong. */
  readonly parse: (raw: string) => T | { readonly problem: string };
  /** Never echoed in error messages. */
  readonly secret?: boolean;
}

const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function integer(min: number, max: number) {
  return (raw: string): number | { problem: string } => {
    if (!/^-?\d+$/.test(raw.trim())) return { problem: `must be an integer from ${min} to ${max}` };
    const value = Number(raw);
    if (value < min || value > max) return { problem: `must be an integer from ${min} to ${max}` };
    return value;
  };
}

function boolean(raw: string): boolean | { problem: string } {
  const value = raw.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(value)) return true;
  if (['false', '0', 'no', 'off'].includes(value)) return false;
  return { problem: 'must be true or false' };
}

function nonEmpty(raw: string): string | { problem: string } {
  return raw.trim() === '' ? { problem: 'must not be empty' } : raw.trim();
}

function databaseUrl(raw: string): DatabaseConfig | { problem: string } {
  const value = raw.trim();
  if (value.startsWith('sqlite:')) {
    const file = value.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (file === '') return { problem: 'sqlite: needs a file path, e.g. sqlite:./data/urlshortener.db' };
    return { kind: 'sqlite', url: file, poolMax: 1 };
  }
  if (value.startsWith('postgres://') || value.startsWith('postgresql://')) {
    try {
      new URL(value);
    } catch {
      return { problem: 'is not a valid postgres:// URL' };
    }
    return { kind: 'postgres', url: value, poolMax: 10 };
  }
  return { problem: 'must start with sqlite: or postgres://' };
}

function schemes(raw: string): string[] | { problem: string } {
  const list = raw
    .split(',')
    .map((s) => s.trim().toLowerCase().replace(/:$/, ''))
    .filter((s) => s !== '');
  if (list.length === 0) return { problem: 'must name at least one scheme, e.g. http,https' };
  const bad = list.find((s) => !/^[a-z][a-z0-9+.-]*$/.test(s));
  if (bad !== undefined) return { problem: `"${bad}" is not a URL scheme` };
  return list;
}

function decimal(min: number, max: number) {
  return (raw: string): number | { problem: string } => {
    const value = Number(raw.trim());
    if (raw.trim() === '' || !Number.isFinite(value) || value < min || value > max) {
      return { problem: `must be a number from ${min} to ${max}` };
    }
    return value;
  };
}

function oneOf<T extends string>(values: readonly T[]) {
  return (raw: string): T | { problem: string } =>
    (values as readonly string[]).includes(raw.trim())
      ? (raw.trim() as T)
      : { problem: `must be one of ${values.join(', ')}` };
}

/** An optional URL with one of `protocols`; the empty default means "not set". */
function optionalUrl(protocols: readonly string[]) {
  return (raw: string): string | undefined | { problem: string } => {
    const value = raw.trim();
    if (value === '') return undefined;
    try {
      if (protocols.includes(new URL(value).protocol)) return value;
    } catch {
      // reported below
    }
    return { problem: `must be a ${protocols.map((p) => `${p}//`).join(' or ')} URL` };
  };
}

/** `auto` (undefined: decided from the other tracing settings) or a probability from 0 to 1. */
function samplingRate(raw: string): number | undefined | { problem: string } {
  return raw.trim() === 'auto' ? undefined : decimal(0, 1)(raw);
}

function rateLimitSettings<const G extends string, const P extends string>(
  group: G,
  prefix: P,
  limit: number,
  windowSeconds: number,
  who: string,
) {
  return {
    [`${prefix}_LIMIT`]: {
      name: `${prefix}_LIMIT`,
      default: String(limit),
      description: `Requests admitted per window and client on ${who} (policy \`${group}\`).`,
      parse: integer(1, 1_000_000_000),
    },
    [`${prefix}_WINDOW_S`]: {
      name: `${prefix}_WINDOW_S`,
      default: String(windowSeconds),
      description: `Window of the \`${group}\` policy, in seconds (the token bucket refills \`limit\` tokens per window).`,
      parse: integer(1, 86_400),
    },
  } as Record<`${P}_LIMIT` | `${P}_WINDOW_S`, Setting<number>>;
}

function headerValue(raw: string): string | { problem: string } {
  // Printable ASCII only: anything else cannot go into an HTTP header.
  return /^[\x20-\x7e]+$/.test(raw) ? raw : { problem: 'must be printable ASCII, non-empty' };
}

export const SETTINGS = {
  NODE_ENV: {
    name: 'NODE_ENV',
    default: 'development',
    description: '`production` turns on the production safeguards.',
    parse: nonEmpty,
  },
  HOST: {
    name: 'HOST',
    default: '127.0.0.1',
    description: 'Address to listen on. Use `0.0.0.0` to accept connections from other machines.',
    parse: nonEmpty,
  },
  PORT: {
    name: 'PORT',
    default: '8000',
    description: 'TCP port to listen on (0 picks a free one).',
    parse: integer(0, 65535),
  },
  LOG_LEVEL: {
    name: 'LOG_LEVEL',
    default: 'info',
    description: `Log level: ${LOG_LEVELS.join(', ')}. Redirects are logged per request only at \`debug\` and below.`,
    parse: (raw: string) =>
      (LOG_LEVELS as readonly string[]).includes(raw.trim())
        ? (raw.trim() as LogLevel)
        : { problem: `must be one of ${LOG_LEVELS.join(', ')}` },
  },
  DATABASE_URL: {
    name: 'DATABASE_URL',
    default: 'sqlite:./data/urlshortener.db',
    description: '`sqlite:<file>` (embedded, created on first start) or `postgres://user@host:port/db`.',
    parse: databaseUrl,
  },
  DB_POOL_MAX: {
    name: 'DB_POOL_MAX',
    default: '10',
    description: 'Maximum PostgreSQL connections per process (SQLite always uses one).',
    parse: integer(1, 1000),
  },
  DB_CONNECT_TIMEOUT_MS: {
    name: 'DB_CONNECT_TIMEOUT_MS',
    default: '3000',
    description:
      'PostgreSQL: how long a request may wait for a database connection (the server away or restarting, or every pooled connection busy) before it answers 503 `Database unavailable`.',
    parse: integer(100, 600_000),
  },
  BODY_LIMIT: {
    name: 'BODY_LIMIT',
    default: '1048576',
    description: 'Largest accepted request body, in bytes; larger bodies get 413.',
    parse: integer(1, 1024 * 1024 * 1024),
  },
  TRUST_PROXY: {
    name: 'TRUST_PROXY',
    default: 'false',
    description: 'Trust `X-Forwarded-*` headers (set when behind a reverse proxy).',
    parse: boolean,
  },
  SHUTDOWN_TIMEOUT_MS: {
    name: 'SHUTDOWN_TIMEOUT_MS',
    default: '10000',
    description: 'How long a graceful shutdown may take before the process exits anyway.',
    parse: integer(0, 600_000),
  },
  REQUEST_TIMEOUT_MS: {
    name: 'REQUEST_TIMEOUT_MS',
    default: '30000',
    description:
      'How long a client may take to send a whole request, headers and body; a slower one gets 408 and its connection is closed (slow clients cannot hold connections). 0: no limit.',
    parse: integer(0, 3_600_000),
  },
  HEADERS_TIMEOUT_MS: {
    name: 'HEADERS_TIMEOUT_MS',
    default: '10000',
    description:
      'How long a client may take to send the request headers (408 and closed after that); at most `REQUEST_TIMEOUT_MS`. 0: no limit of its own.',
    parse: integer(0, 3_600_000),
  },
  KEEP_ALIVE_TIMEOUT_MS: {
    name: 'KEEP_ALIVE_TIMEOUT_MS',
    default: '5000',
    description:
      "How long an idle keep-alive connection stays open after a response. Behind a proxy that reuses its connections to the service, set it above the proxy's idle timeout.",
    parse: integer(1, 3_600_000),
  },
  CONNECTION_TIMEOUT_MS: {
    name: 'CONNECTION_TIMEOUT_MS',
    default: '60000',
    description:
      'A connection on which nothing is received or sent for this long while a request is read or answered is closed. 0: no limit.',
    parse: integer(0, 3_600_000),
  },
  URL_MAX_LENGTH: {
    name: 'URL_MAX_LENGTH',
    default: '2048',
    description: 'Longest accepted target URL, in characters.',
    parse: integer(1, 65_536),
  },
  URL_ALLOWED_SCHEMES: {
    name: 'URL_ALLOWED_SCHEMES',
    default: 'http,https',
    description: 'Comma-separated URL schemes a target URL may use.',
    parse: schemes,
  },
  REDIRECT_CACHE_CONTROL: {
    name: 'REDIRECT_CACHE_CONTROL',
    default: 'private, max-age=0',
    description: '`Cache-Control` header sent with every redirect.',
    parse: headerValue,
  },
  CACHE_MAX_ENTRIES: {
    name: 'CACHE_MAX_ENTRIES',
    default: '100000',
    description:
      'Entries in the in-process redirect cache (known and unknown codes), least recently used evicted first.',
    parse: integer(0, 100_000_000),
  },
  CACHE_TTL_MS: {
    name: 'CACHE_TTL_MS',
    default: '60000',
    description:
      'How long a cached redirect is trusted. Changes made on any instance reach every cache at once through `url.*` events; this bounds how long another instance may serve a changed link only while the event bus is away. Unknown codes are cached for at most 1 s.',
    parse: integer(0, 86_400_000),
  },
  CLICK_FLUSH_INTERVAL_MS: {
    name: 'CLICK_FLUSH_INTERVAL_MS',
    default: '500',
    description: 'How often buffered clicks are written to the database; a `kill -9` loses at most this much.',
    parse: integer(10, 60_000),
  },
  CLICK_COMPACT_INTERVAL_MS: {
    name: 'CLICK_COMPACT_INTERVAL_MS',
    default: '60000',
    description:
      'How often written clicks are folded into the stored counts, and sooner once this instance has written clicks for 100,000 mappings. Until then they wait in a narrow table (a row per mapping) that every read of a count includes; folding is what writes to the wide mappings table.',
    parse: integer(100, 3_600_000),
  },
  REDIS_URL: {
    name: 'REDIS_URL',
    default: '',
    description:
      'Shared Redis (`redis://host:6379`) for state that every instance must agree on (rate limits, the settings-change signal, a fast copy of revocations and lockouts, which the database keeps). Empty: in-process memory. Run it with `maxmemory-policy noeviction`.',
    parse: optionalUrl(['redis:', 'rediss:']),
  },
  OTEL_SDK_DISABLED: {
    name: 'OTEL_SDK_DISABLED',
    default: 'false',
    description: '`true` turns tracing off entirely: no SDK, no instrumentation, no span work per request.',
    parse: boolean,
  },
  OTEL_SERVICE_NAME: {
    name: 'OTEL_SERVICE_NAME',
    default: 'urlshortener',
    description: '`service.name` of the spans.',
    parse: nonEmpty,
  },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    name: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    default: '',
    description:
      'OTLP/HTTP collector base URL (e.g. `http://127.0.0.1:4318`); spans go to `<url>/v1/traces`. Empty: spans are processed locally, then dropped.',
    parse: optionalUrl(['http:', 'https:']),
  },
  TRACING_SAMPLER: {
    name: 'TRACING_SAMPLER',
    default: 'ratio',
    description:
      '`ratio`: keep each new trace with probability `TRACING_SAMPLING_RATE`. `adaptive`: aim at `TRACING_TARGET_TRACES_PER_SECOND`, re-adjusted every second, never above the rate. Both follow a sampled parent; both decide from the trace id.',
    parse: oneOf<TracingSamplerKind>(['ratio', 'adaptive']),
  },
  TRACING_SAMPLING_RATE: {
    name: 'TRACING_SAMPLING_RATE',
    default: 'auto',
    description:
      'Probability (0 to 1) that a new trace is recorded; `0` records nothing and installs no tracing at all. `auto`: 1 when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, otherwise 0 (with nowhere to send spans, tracing stays off and costs nothing).',
    parse: samplingRate,
  },
  TRACING_TARGET_TRACES_PER_SECOND: {
    name: 'TRACING_TARGET_TRACES_PER_SECOND',
    default: '10',
    description: 'What the adaptive sampler aims at: new traces recorded per second.',
    parse: decimal(0.001, 1_000_000),
  },
  RATE_LIMIT_ENABLED: {
    name: 'RATE_LIMIT_ENABLED',
    default: 'true',
    description: '`false` turns rate limiting off (no hook on any route).',
    parse: boolean,
  },
  RATE_LIMIT_ALGORITHM: {
    name: 'RATE_LIMIT_ALGORITHM',
    default: 'token_bucket',
    description:
      '`token_bucket` (bursts up to the limit, refilled evenly over the window) or `sliding_window` (at most the limit in any window, weighted over the previous one).',
    parse: oneOf<RateLimitAlgorithmName>(['token_bucket', 'sliding_window']),
  },
  ...rateLimitSettings('auth', 'RATE_LIMIT_AUTH', 20, 60, 'sign-in, registration and sign-out'),
  ...rateLimitSettings('writes', 'RATE_LIMIT_WRITES', 60, 60, 'creating, changing and deleting'),
  ...rateLimitSettings(
    'redirects',
    'RATE_LIMIT_REDIRECTS',
    50_000,
    1,
    'redirects (high: one address can be a whole office behind NAT; this only stops floods)',
  ),
  ...rateLimitSettings('default', 'RATE_LIMIT_DEFAULT', 600, 60, 'every other route (listing, documents)'),
  REDIS_KEY_PREFIX: {
    name: 'REDIS_KEY_PREFIX',
    default: 'urlshortener:',
    description: 'Prepended to every Redis key this service writes, so several deployments can share one Redis.',
    parse: nonEmpty,
  },
  REDIS_TIMEOUT_MS: {
    name: 'REDIS_TIMEOUT_MS',
    default: '500',
    description:
      'Deadline of every Redis command. A command that misses it, or a lost connection, makes Redis count as away: the log says so once, rate limits admit requests (`rate_limit_fail_open_total`), sessions and lockouts are read from the database, and a background ping each second notices when it answers again.',
    parse: integer(10, 60_000),
  },
  SECRET_KEY: {
    name: 'SECRET_KEY',
    default: '',
    description:
      'Signs session tokens (JWT HS256) and CSRF tokens; at least 32 bytes, the same on every instance. Required when `NODE_ENV=production`. Empty: a key is generated on first start and kept in `SECRET_KEY_FILE`.',
    parse: optionalSecret,
    secret: true,
  },
  SECRET_KEY_FILE: {
    name: 'SECRET_KEY_FILE',
    default: '',
    description:
      'Where the generated key is kept (mode 0600) when `SECRET_KEY` is empty. Empty: `secret_key` beside the SQLite file, or `./data/secret_key` with PostgreSQL.',
    parse: (raw: string) => raw.trim() || undefined,
  },
  ACCESS_TOKEN_EXPIRE_MINUTES: {
    name: 'ACCESS_TOKEN_EXPIRE_MINUTES',
    default: '1440',
    description: "Session lifetime in minutes: the token's `exp` and both cookies' Max-Age.",
    parse: integer(1, 525_600),
  },
  BCRYPT_ROUNDS: {
    name: 'BCRYPT_ROUNDS',
    default: '12',
    description:
      'bcrypt cost factor for password hashes, 10 to 31. Only with `NODE_ENV=test` may it go down to 4 (to keep test suites fast).',
    parse: integer(4, 31),
  },
  ADMIN_USERNAME: {
    name: 'ADMIN_USERNAME',
    default: '',
    description:
      'When set, an administrator with this username is created at start-up unless the username exists (needs `ADMIN_EMAIL` and `ADMIN_PASSWORD`).',
    parse: (raw: string) => raw.trim() || undefined,
  },
  ADMIN_EMAIL: {
    name: 'ADMIN_EMAIL',
    default: '',
    description: 'Email of the start-up administrator.',
    parse: (raw: string) => raw.trim() || undefined,
  },
  ADMIN_PASSWORD: {
    name: 'ADMIN_PASSWORD',
    default: '',
    description:
      'Password of the start-up administrator, and of `urlshortener create-admin` (which otherwise reads it from stdin).',
    parse: (raw: string) => (raw === '' ? undefined : raw),
    secret: true,
  },
  PASSWORD_MIN_LENGTH: {
    name: 'PASSWORD_MIN_LENGTH',
    default: '8',
    description: `Default of the runtime setting \`password_min_length\` (${AUTH_SETTINGS.password_min_length.minimum} to ${AUTH_SETTINGS.password_min_length.maximum}); administrators change it at \`/api/v1/admin/settings\`.`,
    parse: integer(AUTH_SETTINGS.password_min_length.minimum, AUTH_SETTINGS.password_min_length.maximum),
  },
  MAX_LOGIN_ATTEMPTS: {
    name: 'MAX_LOGIN_ATTEMPTS',
    default: '5',
    description: 'Default of the runtime setting `max_login_attempts`: failed logins per username before the lockout.',
    parse: integer(AUTH_SETTINGS.max_login_attempts.minimum, AUTH_SETTINGS.max_login_attempts.maximum),
  },
  LOCKOUT_DURATION_MINUTES: {
    name: 'LOCKOUT_DURATION_MINUTES',
    default: '15',
    description:
      'Default of the runtime setting `lockout_duration_minutes`: the lockout lasts this long after the last failed attempt.',
    parse: integer(AUTH_SETTINGS.lockout_duration_minutes.minimum, AUTH_SETTINGS.lockout_duration_minutes.maximum),
  },
  NATS_URL: {
    name: 'NATS_URL',
    default: '',
    description:
      "NATS server with JetStream (`nats://host:4222`) for the event bus; empty: the embedded log in the service's own database.",
    parse: (raw: string) => {
      const value = raw.trim();
      if (value === '') return undefined;
      return /^nats:\/\/[^\s/]+$/.test(value) ? value : { problem: 'must look like nats://host:4222' };
    },
  },
  NATS_PREFIX: {
    name: 'NATS_PREFIX',
    default: '',
    description: 'Prefix of the JetStream stream and subject names (to share one NATS between deployments).',
    parse: (raw: string) =>
      /^[A-Za-z0-9_-]*$/.test(raw.trim()) ? raw.trim() : { problem: 'letters, digits, _ and - only' },
  },
  EVENT_PARTITIONS: {
    name: 'EVENT_PARTITIONS',
    default: '4',
    description:
      "Partitions per topic. Order is kept within a partition; a group's members share the partitions. Fixed once events exist.",
    parse: integer(1, 64),
  },
  EVENT_HANDLER_ATTEMPTS: {
    name: 'EVENT_HANDLER_ATTEMPTS',
    default: '5',
    description: 'Attempts of a consumer at one event before it goes to the dead-letter queue.',
    parse: integer(1, 100),
  },
  EVENT_RETRY_BACKOFF_MS: {
    name: 'EVENT_RETRY_BACKOFF_MS',
    default: '200',
    description: 'First pause between attempts; it doubles each time up to `EVENT_RETRY_MAX_BACKOFF_MS`.',
    parse: integer(0, 600_000),
  },
  EVENT_RETRY_MAX_BACKOFF_MS: {
    name: 'EVENT_RETRY_MAX_BACKOFF_MS',
    default: '10000',
    description: 'Longest pause between attempts.',
    parse: integer(0, 3_600_000),
  },
  DLQ_MAX_RETRIES: {
    name: 'DLQ_MAX_RETRIES',
    default: '3',
    description:
      'Times the dead-letter manager re-publishes one event for one consumer group before parking it for an admin.',
    parse: integer(0, 100),
  },
  DLQ_RETRY_DELAY_MS: {
    name: 'DLQ_RETRY_DELAY_MS',
    default: '30000',
    description: 'Pause before the dead-letter manager re-publishes an event.',
    parse: integer(0, 86_400_000),
  },
  EVENT_RETENTION_DAYS: {
    name: 'EVENT_RETENTION_DAYS',
    default: '30',
    description: 'Stored events (event store, embedded log, JetStream streams) older than this are deleted.',
    parse: integer(1, 36_500),
  },
  EVENT_POLL_MS: {
    name: 'EVENT_POLL_MS',
    default: '250',
    description: 'Embedded log: how often consumers and the outbox relay look for work written by other processes.',
    parse: integer(10, 60_000),
  },
  EVENT_LEASE_MS: {
    name: 'EVENT_LEASE_MS',
    default: '10000',
    description:
      "Embedded log: how long a consumer holds its partitions; a crashed consumer's work moves on after this.",
    parse: integer(500, 600_000),
  },
  NATS_ACK_WAIT_MS: {
    name: 'NATS_ACK_WAIT_MS',
    default: '30000',
    description: 'NATS: how long a delivered event may stay unacknowledged before it is delivered again.',
    parse: integer(500, 3_600_000),
  },
  EVENT_MAX_BYTES: {
    name: 'EVENT_MAX_BYTES',
    default: String(512 * 1024),
    description:
      "Largest event (its JSON envelope, in bytes) a change may record; a change whose event is larger is refused with 422 and nothing is stored. Keep it under NATS's `max_payload` (1 MiB by default), with room for the headers and for the dead-letter envelope that wraps a failed event.",
    parse: integer(1024, 64 * 1024 * 1024),
  },
  ROLE: {
    name: 'ROLE',
    default: 'all',
    description:
      'What this process runs: `all` (HTTP API and every consumer), `api` (HTTP API only) or `worker` (consumers only, plus /health and /metrics). `urlshortener serve --role …` overrides it.',
    parse: (raw: string) =>
      (ROLES as readonly string[]).includes(raw.trim())
        ? (raw.trim() as Role)
        : { problem: `must be one of ${ROLES.join(', ')}` },
  },
  SANDBOX_MEMORY_MB: {
    name: 'SANDBOX_MEMORY_MB',
    default: '64',
    description: 'Memory cap of one script run in the sandbox.',
    parse: integer(8, 1024),
  },
  EXECUTION_CONCURRENCY: {
    name: 'EXECUTION_CONCURRENCY',
    default: 'auto',
    description:
      'Sandbox threads per worker: scripts one worker runs at once. `auto`: the number of CPU cores. More wait, `queued`, for a thread.',
    parse: (raw: string) => (raw.trim() === 'auto' ? availableParallelism() : integer(1, 256)(raw)),
  },
  EXECUTION_MAX_THREADS_PER_USER: {
    name: 'EXECUTION_MAX_THREADS_PER_USER',
    default: 'auto',
    description:
      "Sandbox threads of a worker that one user's executions may hold at once; free threads go to users in turn. `auto`: all but one (at least one), so one user's long scripts never make another's wait.",
    parse: (raw: string) => (raw.trim() === 'auto' ? undefined : integer(1, 256)(raw)),
  },
  EXECUTION_MAX_PENDING_PER_USER: {
    name: 'EXECUTION_MAX_PENDING_PER_USER',
    default: '10',
    description:
      'Queued and running executions one user may have at once, over all instances; `POST /execute` answers 429 beyond it.',
    parse: integer(1, 100_000),
  },
  EXECUTION_ACK_WAIT_MS: {
    name: 'EXECUTION_ACK_WAIT_MS',
    default: '5000',
    description:
      "How long a worker may go without a heartbeat before its executions pass to another worker: the executor's ack wait on NATS, its lease on the embedded log, and a claim's lease in the database. Heartbeats go every third of it.",
    parse: integer(300, 600_000),
  },
  NOTIFICATIONS_ALLOW_PRIVATE: {
    name: 'NOTIFICATIONS_ALLOW_PRIVATE',
    default: 'false',
    description:
      'Let notification channels point at loopback, private, link-local or metadata addresses (the SSRF guard is on by default).',
    parse: boolean,
  },
  NOTIFICATION_TIMEOUT_MS: {
    name: 'NOTIFICATION_TIMEOUT_MS',
    default: '5000',
    description:
      'Deadline of one notification request (webhook or chat); a slower receiver counts as a failure and is retried.',
    parse: integer(100, 120_000),
  },
} as const satisfies Record<string, Setting<unknown>>;

type Settings = typeof SETTINGS;
type Parsed<K extends keyof Settings> = Exclude<ReturnType<Settings[K]['parse']>, { problem: string }>;

/** Reads and validates every setting; throws a ConfigError naming each bad variable. */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const read = <K extends keyof Settings>(key: K): Parsed<K> => {
    const setting = SETTINGS[key] as Setting<unknown>;
    const raw = env[setting.name];
    const source = raw === undefined || raw === '' ? setting.default : raw;
    const value = setting.parse(source);
    if (typeof value === 'object' && value !== null && 'problem' in value) {
      const shown = setting.secret ? '(value hidden)' : JSON.stringify(source);
      problems.push(`${setting.name}=${shown}: ${value.problem}`);
      return undefined as never;
    }
    return value as Parsed<K>;
  };

  const database = read('DATABASE_URL');
  const poolMax = read('DB_POOL_MAX');
  const connectTimeoutMs = read('DB_CONNECT_TIMEOUT_MS');
  const config: Config = {
    nodeEnv: read('NODE_ENV'),
    host: read('HOST'),
    port: read('PORT'),
    logLevel: read('LOG_LEVEL'),
    bodyLimit: read('BODY_LIMIT'),
    trustProxy: read('TRUST_PROXY'),
    shutdownTimeoutMs: read('SHUTDOWN_TIMEOUT_MS'),
    http: httpTimeouts(read, problems),
    database:
      database &&
      (database.kind === 'sqlite' ? { ...database, poolMax: 1 } : { ...database, poolMax, connectTimeoutMs }),
    urls: {
      maxLength: read('URL_MAX_LENGTH'),
      allowedSchemes: read('URL_ALLOWED_SCHEMES'),
    },
    redirect: {
      cacheControl: read('REDIRECT_CACHE_CONTROL'),
      cacheMaxEntries: read('CACHE_MAX_ENTRIES'),
      cacheTtlMs: read('CACHE_TTL_MS'),
      clickFlushIntervalMs: read('CLICK_FLUSH_INTERVAL_MS'),
      clickCompactIntervalMs: read('CLICK_COMPACT_INTERVAL_MS'),
    },
    redisUrl: read('REDIS_URL'),
    redisKeyPrefix: read('REDIS_KEY_PREFIX'),
    redisTimeoutMs: read('REDIS_TIMEOUT_MS'),
    auth: authConfig(read, problems, database),
    tracing: tracingConfig(read),
    rateLimit: {
      enabled: read('RATE_LIMIT_ENABLED'),
      algorithm: read('RATE_LIMIT_ALGORITHM'),
      policies: {
        auth: { limit: read('RATE_LIMIT_AUTH_LIMIT'), windowSeconds: read('RATE_LIMIT_AUTH_WINDOW_S') },
        writes: { limit: read('RATE_LIMIT_WRITES_LIMIT'), windowSeconds: read('RATE_LIMIT_WRITES_WINDOW_S') },
        redirects: { limit: read('RATE_LIMIT_REDIRECTS_LIMIT'), windowSeconds: read('RATE_LIMIT_REDIRECTS_WINDOW_S') },
        default: { limit: read('RATE_LIMIT_DEFAULT_LIMIT'), windowSeconds: read('RATE_LIMIT_DEFAULT_WINDOW_S') },
      },
    },
    events: {
      natsUrl: read('NATS_URL'),
      natsPrefix: read('NATS_PREFIX'),
      partitions: read('EVENT_PARTITIONS'),
      handlerAttempts: read('EVENT_HANDLER_ATTEMPTS'),
      retryBackoffMs: read('EVENT_RETRY_BACKOFF_MS'),
      retryMaxBackoffMs: read('EVENT_RETRY_MAX_BACKOFF_MS'),
      dlqMaxRetries: read('DLQ_MAX_RETRIES'),
      dlqRetryDelayMs: read('DLQ_RETRY_DELAY_MS'),
      retentionMs: read('EVENT_RETENTION_DAYS') * 86_400_000,
      pollMs: read('EVENT_POLL_MS'),
      leaseMs: read('EVENT_LEASE_MS'),
      ackWaitMs: read('NATS_ACK_WAIT_MS'),
      maxEventBytes: read('EVENT_MAX_BYTES'),
    },
    role: read('ROLE'),
    sandbox: { memoryBytes: read('SANDBOX_MEMORY_MB') * 1024 * 1024, outputBytes: 64 * 1024 },
    executions: executionsConfig(read),
    notifications: { allowPrivate: read('NOTIFICATIONS_ALLOW_PRIVATE'), timeoutMs: read('NOTIFICATION_TIMEOUT_MS') },
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze(config);
}

function tracingConfig(read: <K extends keyof Settings>(key: K) => Parsed<K>): TracingConfig {
  const otlpEndpoint = read('OTEL_EXPORTER_OTLP_ENDPOINT');
  const samplingRate = read('TRACING_SAMPLING_RATE') ?? (otlpEndpoint === undefined ? 0 : 1);
  const disabled = read('OTEL_SDK_DISABLED');
  return {
    enabled: !disabled && samplingRate > 0,
    serviceName: read('OTEL_SERVICE_NAME'),
    otlpEndpoint,
    sampler: read('TRACING_SAMPLER'),
    samplingRate,
    targetTracesPerSecond: read('TRACING_TARGET_TRACES_PER_SECOND'),
  };
}

function httpTimeouts(read: <K extends keyof Settings>(key: K) => Parsed<K>, problems: string[]): HttpTimeouts {
  const requestTimeoutMs = read('REQUEST_TIMEOUT_MS');
  const headersTimeoutMs = read('HEADERS_TIMEOUT_MS');
  if (requestTimeoutMs > 0 && headersTimeoutMs > requestTimeoutMs) {
    problems.push(`HEADERS_TIMEOUT_MS=${headersTimeoutMs}: must be at most REQUEST_TIMEOUT_MS (${requestTimeoutMs})`);
  }
  return {
    requestTimeoutMs,
    headersTimeoutMs,
    keepAliveTimeoutMs: read('KEEP_ALIVE_TIMEOUT_MS'),
    connectionTimeoutMs: read('CONNECTION_TIMEOUT_MS'),
  };
}

function executionsConfig(read: <K extends keyof Settings>(key: K) => Parsed<K>): ExecutionsConfig {
  const concurrency = read('EXECUTION_CONCURRENCY');
  return {
    concurrency,
    maxThreadsPerUser: Math.min(read('EXECUTION_MAX_THREADS_PER_USER') ?? Math.max(1, concurrency - 1), concurrency),
    maxPendingPerUser: read('EXECUTION_MAX_PENDING_PER_USER'),
    ackWaitMs: read('EXECUTION_ACK_WAIT_MS'),
  };
}

const SECRET_KEY_MIN_BYTES = 32;

function optionalSecret(raw: string): string | undefined | { problem: string } {
  if (raw === '') return undefined;
  if (Buffer.byteLength(raw, 'utf8') < SECRET_KEY_MIN_BYTES) {
    return { problem: `must be at least ${SECRET_KEY_MIN_BYTES} bytes (e.g. \`openssl rand -base64 48\`)` };
  }
  return raw;
}

/** The account settings, with the rules that span several variables. */
function authConfig(
  read: <K extends keyof Settings>(key: K) => Parsed<K>,
  problems: string[],
  database: DatabaseConfig | undefined,
): AuthConfig {
  const nodeEnv = read('NODE_ENV');
  const secretKey = read('SECRET_KEY');
  if (nodeEnv === 'production' && secretKey === undefined && !problems.some((p) => p.startsWith('SECRET_KEY='))) {
    problems.push(
      `SECRET_KEY: required when NODE_ENV=production, at least ${SECRET_KEY_MIN_BYTES} bytes and the same on every instance (e.g. \`openssl rand -base64 48\`)`,
    );
  }
  const bcryptRounds = read('BCRYPT_ROUNDS');
  if (bcryptRounds !== undefined && bcryptRounds < 10 && nodeEnv !== 'test') {
    problems.push(
      `BCRYPT_ROUNDS=${bcryptRounds}: must be at least 10 (values down to 4 are allowed only with NODE_ENV=test)`,
    );
  }
  const admin = { username: read('ADMIN_USERNAME'), email: read('ADMIN_EMAIL'), password: read('ADMIN_PASSWORD') };
  if (admin.username !== undefined) {
    if (!isValidUsername(admin.username)) {
      problems.push(
        `ADMIN_USERNAME=${JSON.stringify(admin.username)}: must be 3 to 32 of letters, digits, '_', '.', '-'`,
      );
    }
    if (admin.email === undefined || !isValidEmail(admin.email.toLowerCase())) {
      problems.push('ADMIN_EMAIL: a valid email address is required with ADMIN_USERNAME');
    }
    const minLength = read('PASSWORD_MIN_LENGTH');
    if (admin.password === undefined) problems.push('ADMIN_PASSWORD: required with ADMIN_USERNAME');
    else if (Buffer.byteLength(admin.password, 'utf8') > PASSWORD_MAX_BYTES) {
      problems.push(`ADMIN_PASSWORD: must be at most ${PASSWORD_MAX_BYTES} bytes`);
    } else if (minLength !== undefined && passwordLength(admin.password) < minLength) {
      problems.push(`ADMIN_PASSWORD: must be at least ${minLength} characters (PASSWORD_MIN_LENGTH)`);
    }
  }
  let secretKeyFile = read('SECRET_KEY_FILE');
  if (secretKeyFile === undefined && database !== undefined) {
    if (database.kind === 'postgres') secretKeyFile = join('data', 'secret_key');
    else if (database.url !== ':memory:') secretKeyFile = join(dirname(database.url), 'secret_key');
  }
  return {
    secretKey,
    secretKeyFile,
    accessTokenMinutes: read('ACCESS_TOKEN_EXPIRE_MINUTES'),
    bcryptRounds,
    admin,
    defaults: {
      password_min_length: read('PASSWORD_MIN_LENGTH'),
      max_login_attempts: read('MAX_LOGIN_ATTEMPTS'),
      lockout_duration_minutes: read('LOCKOUT_DURATION_MINUTES'),
    },
  };
}

/** The README's configuration table. */
export function settingsMarkdown(): string {
  const rows = Object.values(SETTINGS).map(
    (s) => `| \`${s.name}\` | \`${s.default}\` | ${s.description.replace(/\|/g, '\\|')} |`,
  );
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
