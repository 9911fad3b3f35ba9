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
} as const;
