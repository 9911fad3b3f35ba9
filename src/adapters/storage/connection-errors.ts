/**
 * Whether an error means "the database cannot be reached right now" (answered 503 and retried)
 * rather than "this statement is wrong" (a bug, answered 500). PostgreSQL only: an SQLite file
 * is part of the process.
 */

/** SQLSTATE classes and codes of a lost or refused connection. */
const UNAVAILABLE_CODES = new Set([
  '57P01', // admin_shutdown: pg_terminate_backend, a restart, a failover
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: the server is starting or shutting down
  '53300', // too_many_connections
]);
/** Node's socket errors while connecting to or talking with the server. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
/** What node-postgres and pg-pool say when a connection ends, breaks or cannot be had in time. */
const MESSAGES = [
  /^Connection terminated/,
  /not queryable/,
  /^timeout exceeded when trying to connect$/,
  /^Client was closed and is not queryable$/,
];

const MAX_DEPTH = 4;

export function isDatabaseUnavailable(error: unknown, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > MAX_DEPTH) return false;
  const { code, message, cause, errors } = error as {
    code?: unknown;
    message?: unknown;
    cause?: unknown;
    errors?: unknown;
  };
  if (typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || code.startsWith('08') || SOCKET_CODES.has(code))) {
    return true;
  }
  if (typeof message === 'string' && MESSAGES.some((pattern) => pattern.test(message))) return true;
  if (Array.isArray(errors) && errors.some((inner) => isDatabaseUnavailable(inner, depth + 1))) return true;
  return cause !== undefined && isDatabaseUnavailable(cause, depth + 1);
}

/** SQLite result codes (primary, or extended: they start the same) of a file that cannot take a write now. */
const SQLITE_FILE_FAILURE = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|READONLY|CANTOPEN|PROTOCOL)(_|$)/;

/**
 * Whether an SQLite error is the file's rather than the statement's: locked by another process
 * past the busy timeout, the disk full or failing, the file read-only or gone (see `isDatabaseAway`).
 */
export function isSqliteFileFailure(error: unknown): boolean {
  if (typeof error !== 'object' || error === null || !('code' in error)) return false;
  const { code } = error as { code: unknown };
  return typeof code === 'string' && SQLITE_FILE_FAILURE.test(code);
}

/**
 * Whether an error means the database cannot take the request now, whichever it is: PostgreSQL
 * unreachable (`isDatabaseUnavailable`) or the SQLite file unable to take a write
 * (`isSqliteFileFailure`: another process holding its lock past the busy timeout, say). Answered
 * 503 `Database unavailable` and worth a retry; a consumer that meets it waits rather than
 * counting an attempt.
 */
export function isDatabaseAway(error: unknown): boolean {
  return isDatabaseUnavailable(error) || isSqliteFileFailure(error);
}
