/**
 * Errors are values with a stable code, an HTTP status and a human-readable detail. Every one is
 * made by a named constructor in the table `errors` below (one row each: code, status, detail),
 * and turned into `{detail}` by one error handler; the codes form the union `ErrorCode`.
 */
export class AppError<C extends string = ErrorCode> extends Error {
  constructor(
    readonly code: C,
    readonly statusCode: number,
    readonly detail: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(detail);
    this.name = 'AppError';
  }
}

/** What a row of the table makes of its constructor's arguments: the detail, or more. */
type Answer =
  | string
  | {
      readonly detail: string;
      readonly headers?: Readonly<Record<string, string>>;
      /** Only where another layer decided the status (the framework's own 4xx answers). */
      readonly status?: number;
    };

/** A named constructor: makes the errors with `code`, which it carries too. */
export type NamedConstructor<C extends string, A extends unknown[]> = ((...args: A) => AppError<C>) & {
  readonly code: C;
};

/** One row of the error table: the code, its status, and the detail made of the constructor's arguments. */
function define<const C extends string, A extends unknown[]>(
  code: C,
  status: number,
  answer: (...args: A) => Answer,
): NamedConstructor<C, A> {
  const make = (...args: A) => {
    const made = answer(...args);
    if (typeof made === 'string') return new AppError(code, status, made);
    return new AppError(code, made.status ?? status, made.detail, made.headers);
  };
  return Object.assign(make, { code });
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
  validation: define('VALIDATION', 422, (detail: string) => detail),
  codeReserved: define('CODE_RESERVED', 422, () => 'Code is reserved'),
  codeConflict: define('CODE_CONFLICT', 409, () => 'Code already exists'),
  mappingNotFound: define('MAPPING_NOT_FOUND', 404, () => 'URL mapping not found'),
  // A link past its lifecycle limits (README "Expiry and visit limits"): gone, and says why.
  linkExpired: define('LINK_EXPIRED', 410, (at: string) => `This link expired at ${at}.`),
  linkExhausted: define('LINK_EXHAUSTED', 410, (max: number) => `This link has reached its limit of ${max} visits.`),
  // A signed-in user on someone else's link (an anonymous caller gets mappingNotFound: docs/links.md).
  notLinkOwner: define('NOT_LINK_OWNER', 403, () => 'Only the owner of this link or an administrator may change it'),
  codeGenerationFailed: define('CODE_GENERATION_FAILED', 503, () => ({
    detail: 'No free code found; try again',
    headers: { 'retry-after': '1' },
  })),
  routeNotFound: define('ROUTE_NOT_FOUND', 404, () => 'Not found'),
  methodNotAllowed: define('METHOD_NOT_ALLOWED', 405, (allow: readonly string[]) => ({
    detail: 'Method not allowed',
    headers: { allow: allow.join(', ') },
  })),
  payloadTooLarge: define('PAYLOAD_TOO_LARGE', 413, (limit: number) => `Request body is larger than ${limit} bytes`),
  unsupportedMediaType: define('UNSUPPORTED_MEDIA_TYPE', 415, (type: string | undefined) =>
    type ? `Unsupported media type: ${type}; use application/json` : 'Missing Content-Type; use application/json',
  ),
  badUrl: define('BAD_URL', 400, () => 'Malformed URL: its percent-encoding is not valid UTF-8'),
  uriTooLong: define('URI_TOO_LONG', 414, () => 'Request path is too long'),
  contentLengthMismatch: define(
    'CONTENT_LENGTH_MISMATCH',
    400,
    () => 'Request body length does not match its Content-Length',
  ),
  /** A 4xx the framework answered itself (its status and message), not one of ours. */
  requestRejected: define('REQUEST_REJECTED', 400, (status: number, message: string) => ({ status, detail: message })),
  internal: define('INTERNAL', 500, () => 'Internal server error'),
  eventTooLarge: define(
    'EVENT_TOO_LARGE',
    422,
    (eventType: string, bytes: number, limit: number) =>
      `The change is refused: its ${eventType} event would be ${bytes} bytes, over the limit of ${limit} bytes`,
  ),
  eventRefused: define('EVENT_REFUSED', 422, (reason: string) => `The event bus can never take this event: ${reason}`),
  backendUnavailable: define('BACKEND_UNAVAILABLE', 503, (backend: Backend) => ({
    detail: `${BACKEND_NAMES[backend]} unavailable`,
    headers: { 'retry-after': '1' },
  })),
  // Import and export of links (README "Import and export").
  tooManyImportRows: define(
    'TOO_MANY_IMPORT_ROWS',
    413,
    (max: number) =>
      `The file has more than ${max} rows, the most one import takes: nothing was imported. Split it, or use \`urlshortener import\`.`,
  ),
  importTooLarge: define(
    'IMPORT_TOO_LARGE',
    413,
    (limit: number) =>
      `The import body is larger than ${limit} bytes (IMPORT_BODY_LIMIT): nothing was imported. Split the file, or use \`urlshortener import\`.`,
  ),
  importFormat: define('IMPORT_FORMAT', 422, (detail: string) => `The import file cannot be read: ${detail}`),
  webClientNotBuilt: define('WEB_CLIENT_NOT_BUILT', 503, () => 'The web client is not built; run npm run build'),
  // Answered on the connection itself, before a request reaches a route (src/http/client-errors.ts).
  requestTimeout: define('REQUEST_TIMEOUT', 408, () => 'Request not received in time'),
  headersTooLarge: define('HEADERS_TOO_LARGE', 431, () => 'Request headers are too large'),
  malformedRequest: define('MALFORMED_REQUEST', 400, () => 'Malformed HTTP request'),
  rateLimited: define('RATE_LIMITED', 429, (retryAfterSeconds: number) => ({
    detail: 'Rate limit exceeded',
    headers: { 'retry-after': String(retryAfterSeconds) },
  })),

  // Accounts, sessions and CSRF (spec §5, design "Accounts" and "Tokens and CSRF").
  /**
   * RFC 7235 §3.1 asks every 401 to name a scheme; RFC 6750 §3.1 adds `invalid_token` when the
   * request presented an API key (`Authorization: Bearer`) that does not authenticate.
   */
  notAuthenticated: define('NOT_AUTHENTICATED', 401, (presented?: 'bearer') => ({
    detail: 'Not authenticated',
    headers: {
      'www-authenticate':
        presented === 'bearer' ? 'Bearer realm="urlshortener", error="invalid_token"' : 'Bearer realm="urlshortener"',
    },
  })),
  invalidCredentials: define('INVALID_CREDENTIALS', 401, () => 'Invalid username or password'),
  accountLocked: define('ACCOUNT_LOCKED', 423, (retryAfterSeconds: number) => ({
    detail: 'Account locked due to too many failed attempts',
    headers: { 'retry-after': String(retryAfterSeconds) },
  })),
  loginThrottled: define('LOGIN_THROTTLED', 429, (retryAfterSeconds: number) => ({
    detail: 'Too many failed logins from this address; try again later',
    headers: { 'retry-after': String(retryAfterSeconds) },
  })),
  adminRequired: define('ADMIN_REQUIRED', 403, () => 'Admin privileges required'),
  usernameTaken: define('USERNAME_TAKEN', 409, () => 'Username already registered'),
  emailTaken: define('EMAIL_TAKEN', 409, () => 'User already exists'),
  passwordTooShort: define(
    'PASSWORD_TOO_SHORT',
    400,
    (minLength: number) => `Password must be at least ${minLength} characters`,
  ),
  passwordTooLong: define('PASSWORD_TOO_LONG', 400, (maxBytes: number) => `Password must be at most ${maxBytes} bytes`),
  csrfMissingHeader: define('CSRF_MISSING_HEADER', 403, () => 'CSRF token missing from X-CSRF-Token header'),
  csrfTokenMismatch: define('CSRF_TOKEN_MISMATCH', 403, () => 'CSRF token invalid or does not match cookie'),
  csrfInvalidSignature: define('CSRF_INVALID_SIGNATURE', 403, () => 'CSRF token signature invalid'),
  accountDisabled: define('ACCOUNT_DISABLED', 403, () => 'Account disabled'),
  userNotFound: define('USER_NOT_FOUND', 404, () => 'User not found'),
  // 409, not 422: the request is well-formed; it conflicts with the accounts as they are now.
  lastAdmin: define('LAST_ADMIN', 409, () => 'Cannot remove the last administrator'),
  apiKeyNotFound: define('API_KEY_NOT_FOUND', 404, () => 'API key not found'),
  crossSiteRequest: define(
    'CROSS_SITE_REQUEST',
    403,
    () => 'Cross-site request refused: sign in, sign up and sign out only from this site',
  ),

  // Executions, notifications and dead letters.
  tooManyExecutions: define(
    'TOO_MANY_EXECUTIONS',
    429,
    (limit: number) => `Too many executions queued or running (at most ${limit}); wait for one to end`,
  ),
  executionNotFound: define('EXECUTION_NOT_FOUND', 404, () => 'Execution not found'),
  channelNotFound: define('CHANNEL_NOT_FOUND', 404, () => 'Notification channel not found'),
  // 409, as for the last administrator: the body is fine; the caller's channels as they are now refuse it.
  tooManyChannels: define(
    'TOO_MANY_CHANNELS',
    409,
    (limit: number) => `A user may have at most ${limit} notification channels; delete one first`,
  ),
  deadLetterNotFound: define('DEAD_LETTER_NOT_FOUND', 404, () => 'Dead letter not found'),
} as const;

/** Every code the service's errors carry. */
export type ErrorCode = (typeof errors)[keyof typeof errors]['code'];
