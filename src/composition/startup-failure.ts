import type { Config, DatabaseConfig } from '../config/config.js';
import { isDatabaseUnavailable } from '../adapters/storage/connection-errors.js';
import { UnsupportedRuntimeError } from '../adapters/storage/sqlite-runtime.js';

interface SystemError {
  readonly code?: unknown;
  readonly syscall?: unknown;
  readonly message?: unknown;
  readonly cause?: unknown;
  readonly errors?: unknown;
}

/** PostgreSQL refusing who we are or what we ask for: wrong user, password or database name. */
const POSTGRES_REFUSALS = new Set(['28000', '28P01', '3D000']);

/** The first error in `error`, its causes and its aggregated errors that `matches`. */
function find(error: unknown, matches: (e: SystemError) => boolean, depth = 0): SystemError | undefined {
  if (typeof error !== 'object' || error === null || depth > 4) return undefined;
  const e = error as SystemError;
  if (matches(e)) return e;
  const inner = Array.isArray(e.errors) ? e.errors : [];
  for (const candidate of [...inner, e.cause]) {
    const found = find(candidate, matches, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/** A connection string without its password. */
export function withoutPassword(url: string): string {
  return url.replace(/\/\/([^:/@]*):[^@]*@/, '//$1:***@');
}

function listenFailure(error: SystemError, { host, port }: Config): string {
  const where = `${host}:${port}`;
  switch (error.code) {
    case 'EADDRINUSE':
      return `cannot listen on ${where}: the port is already in use; check PORT (or stop what holds it)`;
    case 'EADDRNOTAVAIL':
      return `cannot listen on ${where}: no such address on this machine; check HOST`;
    case 'EACCES':
      return `cannot listen on ${where}: not allowed (ports below 1024 need privileges); check PORT`;
    default:
      return `cannot listen on ${where}: ${String(error.code ?? error.message)}; check HOST and PORT`;
  }
}

/** The first message in `error` and its causes (a failed connection to both of localhost's addresses has none of its own). */
function firstMessage(error: unknown): string {
  return String(find(error, (e) => typeof e.message === 'string' && e.message !== '')?.message);
}

/** What the start says once when PostgreSQL does not answer and it waits (DB_START_TIMEOUT_MS). */
export function waitingForDatabase(error: unknown, { url, startTimeoutMs = 0 }: DatabaseConfig): string {
  const seconds = Math.round(startTimeoutMs / 100) / 10;
  return `waiting for PostgreSQL at ${withoutPassword(url)} (${firstMessage(error)}); trying again every second for up to ${seconds} s (DB_START_TIMEOUT_MS)`;
}

/**
 * The one line to print when the service cannot start because of its surroundings (an address
 * taken, a database away), naming the setting to check; undefined for anything else (a bug, whose
 * stack is worth printing).
 */
export function startupFailure(error: unknown, config: Config): string | undefined {
  const listen = find(error, (e) => e.syscall === 'listen');
  if (listen) return listenFailure(listen, config);
  const { kind, url } = config.database;
  if (kind === 'postgres') {
    const refused = find(error, (e) => typeof e.code === 'string' && POSTGRES_REFUSALS.has(e.code));
    if (refused || isDatabaseUnavailable(error)) {
      const reason = refused ? String(refused.message) : firstMessage(error);
      return `cannot use PostgreSQL at ${withoutPassword(url)} (${reason}); check DATABASE_URL and that the server runs`;
    }
  }
  const runtime = find(error, (e) => e instanceof UnsupportedRuntimeError);
  if (runtime) return String(runtime.message);
  const sqlite = find(error, (e) => typeof e.code === 'string' && e.code.startsWith('SQLITE_CANTOPEN'));
  if (kind === 'sqlite' && sqlite) {
    return `cannot open the SQLite database ${url} (${String(sqlite.message)}); check DATABASE_URL and that its folder exists and is writable`;
  }
  return undefined;
}
