import type { LinkWritePolicy } from '../domain/settings.js';
/**
 * The typed configuration: what `loadConfig` returns, validated and frozen. The lists below are
 * both the values a setting accepts and the union types the code uses.
 */

import type { AuthSettingValues } from '../domain/settings.js';

/** `NODE_ENV`: any other value (a typo of `production`) would silently drop the production safeguards. */
export const NODE_ENVS = ['development', 'production', 'test'] as const;
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const ROLES = ['all', 'api', 'worker'] as const;
export type Role = (typeof ROLES)[number];

export const TRACING_SAMPLERS = ['ratio', 'adaptive'] as const;
export type TracingSamplerKind = (typeof TRACING_SAMPLERS)[number];

export const RATE_LIMIT_ALGORITHMS = ['token_bucket', 'sliding_window'] as const;
export type RateLimitAlgorithmName = (typeof RATE_LIMIT_ALGORITHMS)[number];

export const RATE_LIMIT_GROUPS = ['auth', 'writes', 'redirects', 'default'] as const;
export type RateLimitGroup = (typeof RATE_LIMIT_GROUPS)[number];

export interface DatabaseConfig {
  readonly kind: 'sqlite' | 'postgres';
  /** For sqlite: the file path (or `:memory:`); for postgres: the connection string. */
  readonly url: string;
  readonly poolMax: number;
  /** PostgreSQL: how long a query may wait for a connection before it fails (503). */
  readonly connectTimeoutMs?: number;
  /** PostgreSQL: how long the start waits for the database to answer before it gives up. */
  readonly startTimeoutMs?: number;
  /** PostgreSQL: the server ends a session idle inside a transaction this long (0: the server's setting). */
  readonly idleInTransactionTimeoutMs?: number;
  /** PostgreSQL: a statement unanswered this long has its session looked up (0: never). */
  readonly unansweredCheckMs?: number;
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
  /** CODE_LENGTH and LINK_WRITE_POLICY (the runtime setting's default). */
  readonly links: {
    readonly codeLength: number;
    readonly writePolicy: LinkWritePolicy;
  };
  /** IMPORT_BODY_LIMIT: the largest body of `POST /api/v1/links/import`, in bytes. */
  readonly transfer: {
    readonly importBodyLimit: number;
  };
  readonly redirect: {
    readonly cacheControl: string;
    /** `GET`/`HEAD /{code}` answered in front of Fastify (src/http/fast-redirect.ts). */
    readonly fastPath: boolean;
    readonly cacheMaxEntries: number;
    readonly cacheTtlMs: number;
    readonly clickFlushIntervalMs: number;
    readonly clickCompactIntervalMs: number;
  };
  /** Visit recording and statistics (VISIT_*, COUNT_BOTS). */
  readonly visits: {
    readonly recording: boolean;
    /** VISIT_FLUSH_INTERVAL_MS, or CLICK_FLUSH_INTERVAL_MS when it is not set. */
    readonly flushIntervalMs: number;
    readonly retentionDays: number;
    readonly retentionIntervalMs: number;
    /** Lower-case header name a trusted proxy sets to the country code; undefined: none recorded. */
    readonly countryHeader: string | undefined;
    readonly countBots: boolean;
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
  /** Serving processes on one port (WORKERS); 1: this process serves alone. */
  readonly workers: number;
  readonly sandbox: { readonly memoryBytes: number; readonly outputBytes: number };
  readonly executions: ExecutionsConfig;
  readonly notifications: {
    readonly allowPrivate: boolean;
    readonly timeoutMs: number;
    /** NOTIFICATION_MAX_CHANNELS_PER_USER. */
    readonly maxChannelsPerUser: number;
  };
  /** Failed logins per client address (LOGIN_ADDRESS_*): `maxFailures` 0 is no limit. */
  readonly loginThrottle: { readonly maxFailures: number; readonly windowMs: number };
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
  /** The sandbox threads' nice value (SANDBOX_NICE): 0 is the process's own priority. */
  readonly nice: number;
}
