/**
 * Configuration: read once from the environment at start-up, validated, typed and frozen.
 * No other module reads `process.env`.
 *
 * Every setting is declared once in `SETTINGS`; the README's configuration table is generated
 * from it (`urlshortener config --markdown`), so docs and code cannot drift apart.
 */

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface DatabaseConfig {
  readonly kind: 'sqlite' | 'postgres';
  /** For sqlite: the file path (or `:memory:`); for postgres: the connection string. */
  readonly url: string;
  readonly poolMax: number;
}

export interface Config {
  readonly nodeEnv: string;
  readonly host: string;
  readonly port: number;
  readonly logLevel: LogLevel;
  readonly bodyLimit: number;
  readonly trustProxy: boolean;
  readonly shutdownTimeoutMs: number;
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
  };
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
    default: '1000',
    description:
      'How long a cached redirect (or a cached "unknown code") is trusted. Bounds how long another instance may serve a changed or deleted link.',
    parse: integer(0, 86_400_000),
  },
  CLICK_FLUSH_INTERVAL_MS: {
    name: 'CLICK_FLUSH_INTERVAL_MS',
    default: '500',
    description: 'How often buffered clicks are written to the database; a `kill -9` loses at most this much.',
    parse: integer(10, 60_000),
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
      problems.push(`${setting.name}=${JSON.stringify(source)}: ${value.problem}`);
      return undefined as never;
    }
    return value as Parsed<K>;
  };

  const database = read('DATABASE_URL');
  const poolMax = read('DB_POOL_MAX');
  const config: Config = {
    nodeEnv: read('NODE_ENV'),
    host: read('HOST'),
    port: read('PORT'),
    logLevel: read('LOG_LEVEL'),
    bodyLimit: read('BODY_LIMIT'),
    trustProxy: read('TRUST_PROXY'),
    shutdownTimeoutMs: read('SHUTDOWN_TIMEOUT_MS'),
    database: database && { ...database, poolMax: database.kind === 'sqlite' ? 1 : poolMax },
    urls: {
      maxLength: read('URL_MAX_LENGTH'),
      allowedSchemes: read('URL_ALLOWED_SCHEMES'),
    },
    redirect: {
      cacheControl: read('REDIRECT_CACHE_CONTROL'),
      cacheMaxEntries: read('CACHE_MAX_ENTRIES'),
      cacheTtlMs: read('CACHE_TTL_MS'),
      clickFlushIntervalMs: read('CLICK_FLUSH_INTERVAL_MS'),
    },
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return deepFreeze(config);
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
