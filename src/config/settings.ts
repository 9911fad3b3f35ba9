/**
 * The settings table: every environment variable the service reads, declared once, under its
 * name. The loader, the validation messages, the README's configuration table (`urlshortener
 * config --markdown`) and the typed values all come from these declarations.
 */

import { AUTH_SETTINGS } from '../domain/settings.js';
import {
  autoOr,
  boolean,
  databaseUrl,
  decimal,
  headerValue,
  integer,
  namePrefix,
  nonEmpty,
  oneOf,
  optionalNatsUrl,
  optionalSecret,
  optionalText,
  optionalUrl,
  optionalVerbatim,
  type Parsed,
  schemes,
} from './parsers.js';
import { markdownTable, named, rateLimitSettings } from './setting-declaration.js';
import { EXECUTION_SETTINGS } from './settings-executions.js';
import { LINK_SETTINGS_DECLARATIONS } from './settings-links.js';
import { TRANSFER_SETTINGS } from './settings-transfer.js';
import { REDIRECT_SETTINGS } from './settings-redirect.js';
import { SECURITY_SETTINGS } from './settings-security.js';
import { VISIT_SETTINGS } from './settings-visits.js';
import { WORKER_SETTINGS } from './settings-workers.js';
import { LOG_LEVELS, NODE_ENVS, RATE_LIMIT_ALGORITHMS, ROLES, TRACING_SAMPLERS } from './types.js';

/** Every setting, in the order of the README's table; the key is the variable's name. */
export const SETTINGS = named({
  NODE_ENV: {
    default: 'development',
    description: '`development`, `production` or `test`; `production` turns on the production safeguards.',
    parse: oneOf(NODE_ENVS),
  },
  HOST: {
    default: '127.0.0.1',
    description:
      'Address to listen on. Use `0.0.0.0` to accept connections from other machines; then anyone who reaches it can create, change and delete links, since the URL API needs no sign-in by default (README, "Before you open it to other machines").',
    parse: nonEmpty,
  },
  PORT: {
    default: '8000',
    description: 'TCP port to listen on (0 picks a free one).',
    parse: integer(0, 65535),
  },
  LOG_LEVEL: {
    default: 'info',
    description: `Log level: ${LOG_LEVELS.join(', ')}. Redirects are logged per request only at \`debug\` and below.`,
    parse: oneOf(LOG_LEVELS),
  },
  DATABASE_URL: {
    default: 'sqlite:./data/urlshortener.db',
    description: '`sqlite:<file>` (embedded, created on first start) or `postgres://user@host:port/db`.',
    parse: databaseUrl,
  },
  DB_POOL_MAX: {
    default: '10',
    description: 'Maximum PostgreSQL connections per process (SQLite always uses one).',
    parse: integer(1, 1000),
  },
  DB_CONNECT_TIMEOUT_MS: {
    default: '3000',
    description:
      'PostgreSQL: how long a request may wait for a database connection (the server away or restarting, or every pooled connection busy) before it answers 503 `Database unavailable`.',
    parse: integer(100, 600_000),
  },
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: {
    default: '30000',
    description:
      "PostgreSQL: the server ends a session of the service that has sat inside a transaction this long without a statement (its process frozen, or its host cut off from the database without the server hearing of it), and so lets go of the transaction's locks: without it such a session keeps them until the server's TCP keepalive gives up on the client (about two hours with Linux's defaults), and meanwhile every instance's visit merge stops and an edit of a link it had locked waits. The service's transactions run their statements back to back. Set on each connection (`idle_in_transaction_session_timeout`); `0` leaves the server's own setting.",
    parse: integer(0, 86_400_000),
  },
  DB_UNANSWERED_CHECK_MS: {
    default: '5000',
    description:
      "PostgreSQL: a statement that has had no answer this long has its session looked up on a new connection. When the server cannot be reached within `DB_CONNECT_TIMEOUT_MS`, or the session is gone or not running a statement (the statement or its answer was lost: the connection was cut without the service hearing of it, as in a network split), the connection is closed, its statements fail (503 `Database unavailable`) and the pool opens a new one; without it they wait until the operating system gives up on the connection (about 15 minutes with Linux's defaults), and so does the request. A statement the server is running, however slow, is left alone and looked up again this much later. Behind a pooler such as PgBouncer only an unreachable server closes a connection. `0`: never.",
    parse: integer(0, 3_600_000),
  },
  DB_START_TIMEOUT_MS: {
    default: '30000',
    description:
      'PostgreSQL: how long `serve` and `migrate` wait at start for the database to answer (the server starting up, restarting, out of connections or slower than `DB_CONNECT_TIMEOUT_MS`), trying again every second, before they give up with exit code 1. A refused login or an unknown database ends the start at once; `0` does not wait.',
    parse: integer(0, 3_600_000),
  },
  BODY_LIMIT: {
    default: '1048576',
    description: 'Largest accepted request body, in bytes; larger bodies get 413.',
    parse: integer(1, 1024 * 1024 * 1024),
  },
  TRUST_PROXY: {
    default: 'false',
    description: 'Trust `X-Forwarded-*` headers (set when behind a reverse proxy).',
    parse: boolean,
  },
  SHUTDOWN_TIMEOUT_MS: {
    default: '10000',
    description: 'How long a graceful shutdown may take before the process exits anyway.',
    parse: integer(0, 600_000),
  },
  REQUEST_TIMEOUT_MS: {
    default: '30000',
    description:
      'How long a client may take to send a whole request, headers and body; a slower one gets 408 and its connection is closed (slow clients cannot hold connections). 0: no limit.',
    parse: integer(0, 3_600_000),
  },
  HEADERS_TIMEOUT_MS: {
    default: '10000',
    description:
      'How long a client may take to send the request headers (408 and closed after that); at most `REQUEST_TIMEOUT_MS`. 0: no limit of its own.',
    parse: integer(0, 3_600_000),
  },
  KEEP_ALIVE_TIMEOUT_MS: {
    default: '5000',
    description:
      "How long an idle keep-alive connection stays open after a response. Behind a proxy that reuses its connections to the service, set it above the proxy's idle timeout.",
    parse: integer(1, 3_600_000),
  },
  CONNECTION_TIMEOUT_MS: {
    default: '60000',
    description:
      'A connection on which nothing is received or sent for this long while a request is read or answered is closed. 0: no limit.',
    parse: integer(0, 3_600_000),
  },
  URL_MAX_LENGTH: {
    default: '2048',
    description: 'Longest accepted target URL, in characters.',
    parse: integer(1, 65_536),
  },
  URL_ALLOWED_SCHEMES: {
    default: 'http,https',
    description: 'Comma-separated URL schemes a target URL may use.',
    parse: schemes,
  },
  ...LINK_SETTINGS_DECLARATIONS,
  ...TRANSFER_SETTINGS,
  REDIRECT_CACHE_CONTROL: {
    default: 'private, max-age=0',
    description: '`Cache-Control` header sent with every redirect.',
    parse: headerValue,
  },
  ...REDIRECT_SETTINGS,
  CACHE_MAX_ENTRIES: {
    default: '100000',
    description:
      'Entries in the in-process redirect cache (known and unknown codes), least recently used evicted first.',
    parse: integer(0, 100_000_000),
  },
  CACHE_TTL_MS: {
    default: '60000',
    description:
      'How long a cached redirect is trusted. Changes made on any instance reach every cache at once through `url.*` events; this bounds how long another instance may serve a changed link only while the event bus is away. Unknown codes are cached for at most 1 s.',
    parse: integer(0, 86_400_000),
  },
  CLICK_FLUSH_INTERVAL_MS: {
    default: '500',
    description: 'How often buffered clicks are written to the database; a `kill -9` loses at most this much.',
    parse: integer(10, 60_000),
  },
  CLICK_COMPACT_INTERVAL_MS: {
    default: '60000',
    description:
      'How often written clicks are folded into the stored counts, and sooner once this instance has written clicks for 100,000 mappings. Until then they wait in a narrow table (a row per mapping) that every read of a count includes; folding is what writes to the wide mappings table.',
    parse: integer(100, 3_600_000),
  },
  ...VISIT_SETTINGS,
  REDIS_URL: {
    default: '',
    description:
      'Shared Redis (`redis://host:6379`) for state that every instance must agree on (rate limits, the settings-change signal, a fast copy of revocations and lockouts, which the database keeps). Empty: in-process memory, and settings changes are noticed through a version in the database. Run it with `maxmemory-policy noeviction`.',
    parse: optionalUrl(['redis:', 'rediss:']),
  },
  OTEL_SDK_DISABLED: {
    default: 'false',
    description: '`true` turns tracing off entirely: no SDK, no instrumentation, no span work per request.',
    parse: boolean,
  },
  OTEL_SERVICE_NAME: {
    default: 'urlshortener',
    description: '`service.name` of the spans.',
    parse: nonEmpty,
  },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    default: '',
    description:
      'OTLP/HTTP collector base URL (e.g. `http://127.0.0.1:4318`); spans go to `<url>/v1/traces`. Empty: spans are processed locally, then dropped.',
    parse: optionalUrl(['http:', 'https:']),
  },
  TRACING_SAMPLER: {
    default: 'ratio',
    description:
      '`ratio`: keep each new trace with probability `TRACING_SAMPLING_RATE`. `adaptive`: aim at `TRACING_TARGET_TRACES_PER_SECOND`, re-adjusted every second, never above the rate. Both follow a sampled parent; both decide from the trace id.',
    parse: oneOf(TRACING_SAMPLERS),
  },
  TRACING_SAMPLING_RATE: {
    default: 'auto',
    description:
      'Probability (0 to 1) that a new trace is recorded; `0` records nothing and installs no tracing at all. `auto`: 1 when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, otherwise 0 (with nowhere to send spans, tracing stays off and costs nothing).',
    parse: autoOr(() => undefined, decimal(0, 1)),
  },
  TRACING_TARGET_TRACES_PER_SECOND: {
    default: '10',
    description: 'What the adaptive sampler aims at: new traces recorded per second.',
    parse: decimal(0.001, 1_000_000),
  },
  RATE_LIMIT_ENABLED: {
    default: 'true',
    description: '`false` turns rate limiting off (no hook on any route).',
    parse: boolean,
  },
  RATE_LIMIT_ALGORITHM: {
    default: 'token_bucket',
    description:
      '`token_bucket` (bursts up to the limit, refilled evenly over the window) or `sliding_window` (at most the limit in any window, weighted over the previous one).',
    parse: oneOf(RATE_LIMIT_ALGORITHMS),
  },
  ...rateLimitSettings('auth', 20, 60, 'sign-in, registration and sign-out'),
  ...rateLimitSettings('writes', 60, 60, 'creating, changing and deleting'),
  ...rateLimitSettings(
    'redirects',
    50_000,
    1,
    'redirects (high: one address can be a whole office behind NAT; this only stops floods)',
  ),
  ...rateLimitSettings('default', 600, 60, 'every other route (listing, documents)'),
  REDIS_KEY_PREFIX: {
    default: 'urlshortener:',
    description: 'Prepended to every Redis key this service writes, so several deployments can share one Redis.',
    parse: nonEmpty,
  },
  REDIS_TIMEOUT_MS: {
    default: '500',
    description:
      'Deadline of every Redis command. A command that misses it, or a lost connection, makes Redis count as away: the log says so once, rate limits admit requests (`rate_limit_fail_open_total`), sessions and lockouts are read from the database, and a background ping each second notices when it answers again.',
    parse: integer(10, 60_000),
  },
  SECRET_KEY: {
    default: '',
    description:
      'Signs session tokens (JWT HS256) and CSRF tokens; at least 32 bytes, the same on every instance. Required when `NODE_ENV=production`. Empty: a key is generated on first start and kept in `SECRET_KEY_FILE`.',
    parse: optionalSecret,
    secret: true,
  },
  SECRET_KEY_FILE: {
    default: '',
    description:
      'Where the generated key is kept (mode 0600) when `SECRET_KEY` is empty. Empty: `secret_key` beside the SQLite file, or `./data/secret_key` with PostgreSQL.',
    parse: optionalText,
  },
  ACCESS_TOKEN_EXPIRE_MINUTES: {
    default: '1440',
    description: "Session lifetime in minutes: the token's `exp` and both cookies' Max-Age.",
    parse: integer(1, 525_600),
  },
  BCRYPT_ROUNDS: {
    default: '12',
    description:
      'bcrypt cost factor for password hashes, 10 to 31. Only with `NODE_ENV=test` may it go down to 4 (to keep test suites fast).',
    parse: integer(4, 31),
  },
  ADMIN_USERNAME: {
    default: '',
    description:
      'When set, an administrator with this username is created at start-up unless the username exists (needs `ADMIN_EMAIL` and `ADMIN_PASSWORD`).',
    parse: optionalText,
  },
  ADMIN_EMAIL: {
    default: '',
    description: 'Email of the start-up administrator.',
    parse: optionalText,
  },
  ADMIN_PASSWORD: {
    default: '',
    description:
      'Password of the start-up administrator, and of `urlshortener create-admin` (which otherwise reads it from stdin).',
    parse: optionalVerbatim,
    secret: true,
  },
  PASSWORD_MIN_LENGTH: {
    default: '8',
    description: `Default of the runtime setting \`password_min_length\` (${AUTH_SETTINGS.password_min_length.minimum} to ${AUTH_SETTINGS.password_min_length.maximum}); administrators change it at \`/api/v1/admin/settings\`.`,
    parse: integer(AUTH_SETTINGS.password_min_length.minimum, AUTH_SETTINGS.password_min_length.maximum),
  },
  MAX_LOGIN_ATTEMPTS: {
    default: '5',
    description: 'Default of the runtime setting `max_login_attempts`: failed logins per username before the lockout.',
    parse: integer(AUTH_SETTINGS.max_login_attempts.minimum, AUTH_SETTINGS.max_login_attempts.maximum),
  },
  LOCKOUT_DURATION_MINUTES: {
    default: '15',
    description:
      'Default of the runtime setting `lockout_duration_minutes`: the lockout lasts this long after the last failed attempt.',
    parse: integer(AUTH_SETTINGS.lockout_duration_minutes.minimum, AUTH_SETTINGS.lockout_duration_minutes.maximum),
  },
  ...SECURITY_SETTINGS,
  NATS_URL: {
    default: '',
    description:
      "NATS server with JetStream (`nats://host:4222`) for the event bus; empty: the embedded log in the service's own database.",
    parse: optionalNatsUrl,
  },
  NATS_PREFIX: {
    default: '',
    description: 'Prefix of the JetStream stream and subject names (to share one NATS between deployments).',
    parse: namePrefix,
  },
  EVENT_PARTITIONS: {
    default: '4',
    description:
      "Partitions per topic. Order is kept within a partition; a group's members share the partitions. Fixed once events exist.",
    parse: integer(1, 64),
  },
  EVENT_HANDLER_ATTEMPTS: {
    default: '5',
    description: 'Attempts at one event before the dead-letter queue; an unreachable database counts as none.',
    parse: integer(1, 100),
  },
  EVENT_RETRY_BACKOFF_MS: {
    default: '200',
    description: 'First pause between attempts; it doubles each time up to `EVENT_RETRY_MAX_BACKOFF_MS`.',
    parse: integer(0, 600_000),
  },
  EVENT_RETRY_MAX_BACKOFF_MS: {
    default: '10000',
    description: 'Longest pause between attempts.',
    parse: integer(0, 3_600_000),
  },
  DLQ_MAX_RETRIES: {
    default: '3',
    description:
      'Times the dead-letter manager re-publishes one event for one consumer group before parking it for an admin.',
    parse: integer(0, 100),
  },
  DLQ_RETRY_DELAY_MS: {
    default: '30000',
    description: 'Pause before the dead-letter manager re-publishes an event; an admin may decide meanwhile.',
    parse: integer(0, 86_400_000),
  },
  EVENT_RETENTION_DAYS: {
    default: '30',
    description: 'Events (event store, embedded log, JetStream streams) older than this are deleted, read or not.',
    parse: integer(1, 36_500),
  },
  EVENT_POLL_MS: {
    default: '250',
    description: 'Embedded log: how often consumers and the outbox relay look for work written by other processes.',
    parse: integer(10, 60_000),
  },
  EVENT_LEASE_MS: {
    default: '10000',
    description:
      "Embedded log: how long a consumer holds its partitions; a crashed consumer's work moves on after this.",
    parse: integer(500, 600_000),
  },
  NATS_ACK_WAIT_MS: {
    default: '30000',
    description: 'NATS: how long a delivered event may stay unacknowledged before it is delivered again.',
    parse: integer(500, 3_600_000),
  },
  EVENT_MAX_BYTES: {
    default: String(512 * 1024),
    description:
      "Largest event (its JSON envelope, in bytes) a change may record; a change whose event is larger is refused with 422 and nothing is stored. Keep it under NATS's `max_payload` (1 MiB by default), with room for the headers and for the dead-letter envelope that wraps a failed event.",
    parse: integer(1024, 64 * 1024 * 1024),
  },
  ROLE: {
    default: 'all',
    description:
      'What this process runs: `all` (HTTP API and every consumer), `api` (HTTP API only) or `worker` (consumers only, plus /health and /metrics). `urlshortener serve --role …` overrides it.',
    parse: oneOf(ROLES),
  },
  ...WORKER_SETTINGS,
  ...EXECUTION_SETTINGS,
  NOTIFICATIONS_ALLOW_PRIVATE: {
    default: 'false',
    description:
      'Let notification channels point at loopback, private, link-local or metadata addresses (the SSRF guard is on by default).',
    parse: boolean,
  },
  NOTIFICATION_MAX_CHANNELS_PER_USER: {
    default: '20',
    description:
      "Notification channels one user may have; `POST /api/v1/notifications/channels` answers 409 beyond it. An execution's end is sent to every channel of its owner, so this bounds the requests one execution makes the service send. Channels a user already has past a lowered limit stay; new ones wait until fewer remain.",
    parse: integer(1, 1000),
  },
  NOTIFICATION_TIMEOUT_MS: {
    default: '5000',
    description:
      'Deadline of one notification request (webhook or chat); a slower receiver counts as a failure and is retried.',
    parse: integer(100, 120_000),
  },
});

export type SettingName = keyof typeof SETTINGS;

/** What setting `N` reads as, once valid. */
export type SettingValue<N extends SettingName> = Parsed<(typeof SETTINGS)[N]['parse']>;

/** The README's configuration table. */
export function settingsMarkdown(): string {
  return markdownTable(Object.values(SETTINGS));
}
