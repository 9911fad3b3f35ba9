import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { NOSNIFF } from './plugins/security-headers.js';
import { isDatabaseAway } from '../adapters/storage/connection-errors.js';
import { AppError, type Backend, BackendUnavailableError, errors } from '../domain/errors.js';
import { hasEmptyPathParameter } from './route-table.js';
import { describeValidationError } from './validation.js';

interface ErrorContext {
  readonly bodyLimit: number;
  readonly contentType: string | undefined;
}

/** Maps every failure to an AppError; anything unexpected becomes a 500 that shows nothing. */
export function toAppError(error: FastifyError | AppError | Error, context: ErrorContext): AppError {
  if (error instanceof AppError) return error;
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    return errors.validation(
      describeValidationError(fastifyError.validation as never, fastifyError.validationContext ?? 'body'),
    );
  }
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return errors.validation('body: malformed JSON');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return errors.validation('body: is empty; a JSON object is required');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return errors.payloadTooLarge(context.bodyLimit);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return errors.unsupportedMediaType(context.contentType);
    case 'FST_ERR_BAD_URL':
      return errors.badUrl();
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return errors.uriTooLong();
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return errors.contentLengthMismatch();
  }
  const backend = unavailableBackend(error);
  if (backend) return errors.backendUnavailable(backend);
  const status = fastifyError.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    return errors.requestRejected(status, fastifyError.message);
  }
  return errors.internal();
}

/** The backend an error says is away (503, worth a retry), if any. */
function unavailableBackend(error: Error): Backend | undefined {
  if (error instanceof BackendUnavailableError) return error.backend;
  return isDatabaseAway(error) ? 'database' : undefined;
}

function answer(reply: FastifyReply, error: AppError): void {
  void reply.code(error.statusCode).headers(NOSNIFF).headers(error.headers).send({ detail: error.detail });
}

/** One error handler for the whole app: every error body is `{detail}`. */
export function registerErrorHandling(app: FastifyInstance, bodyLimit: number): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error.validationContext === 'params' && hasEmptyPathParameter(request.params)) {
      return answer(reply, errors.routeNotFound());
    }
    const appError = toAppError(error, { bodyLimit, contentType: request.headers['content-type'] });
    // A backend away is logged where it is noticed (once per outage), not once per request.
    if (appError.statusCode === 503) request.log.debug({ err: error }, 'backend unavailable');
    else if (appError.statusCode >= 500) request.log.error({ err: error }, 'request failed');
    answer(reply, appError);
  });
  app.setNotFoundHandler((_request, reply) => answer(reply, errors.routeNotFound()));
}

/**
 * Fastify's `frameworkErrors`: what its router refuses before any route or hook runs (a path that
 * is not valid percent-encoded UTF-8, a path parameter over `maxParamLength`), answered `{detail}`
 * through the same table instead of Fastify's own `{error, code, message}`.
 */
export function frameworkErrorHandler(bodyLimit: number) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void => {
    answer(reply, toAppError(error, { bodyLimit, contentType: request.headers['content-type'] }));
  };
}
