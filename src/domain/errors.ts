/**
 * Errors are values with a stable code, an HTTP status and a human-readable detail.
 * They are made by the named constructors below and turned into `{detail}` by one error handler.
 */
export class AppError extends Error {
  constructor(
    readonly code: string,
    readonly statusCode: number,
    readonly detail: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(detail);
    this.name = 'AppError';
  }
}

/** A backend the service shares with other instances. */
export type Backend = 'database' | 'redis';

/**
 * A backend that cannot be reached right now (connection lost or refused, deadline passed).
 * Answered 503 `{detail}`; the caller may retry. Adapters throw it; the error handler maps it.
 */
export class BackendUnavailableError extends Error {
  constructor(
    readonly backend: Backend,
    options?: { cause?: unknown },
  ) {
    super(`${backend} unavailable`, options);
    this.name = 'BackendUnavailableError';
  }
}

const BACKEND_NAMES: Readonly<Record<Backend, string>> = { database: 'Database', redis: 'Redis' };

export const errors = {
  validation: (detail: string) => new AppError('VALIDATION', 422, detail),
  codeReserved: () => new AppError('CODE_RESERVED', 422, 'Code is reserved'),
  codeConflict: () => new AppError('CODE_CONFLICT', 409, 'Code already exists'),
  mappingNotFound: () => new AppError('MAPPING_NOT_FOUND', 404, 'URL mapping not found'),
  routeNotFound: () => new AppError('ROUTE_NOT_FOUND', 404, 'Not found'),
  methodNotAllowed: (allow: readonly string[]) =>
    new AppError('METHOD_NOT_ALLOWED', 405, 'Method not allowed', { allow: allow.join(', ') }),
  payloadTooLarge: (limit: number) =>
    new AppError('PAYLOAD_TOO_LARGE', 413, `Request body is larger than ${limit} bytes`),
  unsupportedMediaType: (type: string | undefined) =>
    new AppError(
      'UNSUPPORTED_MEDIA_TYPE',
      415,
      type ? `Unsupported media type: ${type}; use application/json` : 'Missing Content-Type; use application/json',
    ),
  internal: () => new AppError('INTERNAL', 500, 'Internal server error'),
  eventTooLarge: (eventType: string, bytes: number, limit: number) =>
    new AppError(
      'EVENT_TOO_LARGE',
      422,
      `The change is refused: its ${eventType} event would be ${bytes} bytes, over the limit of ${limit} bytes`,
    ),
  eventRefused: (reason: string) =>
    new AppError('EVENT_REFUSED', 422, `The event bus can never take this event: ${reason}`),
  backendUnavailable: (backend: Backend) =>
    new AppError('BACKEND_UNAVAILABLE', 503, `${BACKEND_NAMES[backend]} unavailable`, { 'retry-after': '1' }),
  // Answered on the connection itself, before a request reaches a route (src/http/client-errors.ts).
  requestTimeout: () => new AppError('REQUEST_TIMEOUT', 408, 'Request not received in time'),
  headersTooLarge: () => new AppError('HEADERS_TOO_LARGE', 431, 'Request headers are too large'),
  malformedRequest: () => new AppError('MALFORMED_REQUEST', 400, 'Malformed HTTP request'),
  tooManyExecutions: (limit: number) =>
    new AppError(
      'TOO_MANY_EXECUTIONS',
      429,
      `Too many executions queued or running (at most ${limit}); wait for one to end`,
    ),
  rateLimited: (retryAfterSeconds: number) =>
    new AppError('RATE_LIMITED', 429, 'Rate limit exceeded', { 'retry-after': String(retryAfterSeconds) }),

  // Accounts, sessions and CSRF (spec §5, design "Accounts" and "Tokens and CSRF").
  notAuthenticated: () => new AppError('NOT_AUTHENTICATED', 401, 'Not authenticated'),
  invalidCredentials: () => new AppError('INVALID_CREDENTIALS', 401, 'Invalid username or password'),
  accountLocked: (retryAfterSeconds: number) =>
    new AppError('ACCOUNT_LOCKED', 423, 'Account locked due to too many failed attempts', {
      'retry-after': String(retryAfterSeconds),
    }),
  adminRequired: () => new AppError('ADMIN_REQUIRED', 403, 'Admin privileges required'),
  usernameTaken: () => new AppError('USERNAME_TAKEN', 409, 'Username already registered'),
  emailTaken: () => new AppError('EMAIL_TAKEN', 409, 'User already exists'),
  passwordTooShort: (minLength: number) =>
    new AppError('PASSWORD_TOO_SHORT', 400, `Password must be at least ${minLength} characters`),
  passwordTooLong: (maxBytes: number) =>
    new AppError('PASSWORD_TOO_LONG', 400, `Password must be at most ${maxBytes} bytes`),
  csrfMissingHeader: () => new AppError('CSRF_MISSING_HEADER', 403, 'CSRF token missing from X-CSRF-Token header'),
  csrfTokenMismatch: () => new AppError('CSRF_TOKEN_MISMATCH', 403, 'CSRF token invalid or does not match cookie'),
  csrfInvalidSignature: () => new AppError('CSRF_INVALID_SIGNATURE', 403, 'CSRF token signature invalid'),
} as const;
