import type { FastifyError, FastifyInstance } from 'fastify';
import { isDatabaseUnavailable } from '../adapters/storage/connection-errors.js';
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
  return isDatabaseUnavailable(error) ? 'database' : undefined;
}

/** One error handler for the whole app: every error body is `{detail}`. */
export function registerErrorHandling(app: FastifyInstance, bodyLimit: number): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error.validationContext === 'params' && hasEmptyPathParameter(request.params)) {
      return reply.code(404).send({ detail: errors.routeNotFound().detail });
    }
    const appError = toAppError(error, { bodyLimit, contentType: request.headers['content-type'] });
    // A backend away is logged where it is noticed (once per outage), not once per request.
    if (appError.statusCode === 503) request.log.debug({ err: error }, 'backend unavailable');
    else if (appError.statusCode >= 500) request.log.error({ err: error }, 'request failed');
    void reply.code(appError.statusCode).headers(appError.headers).send({ detail: appError.detail });
  });
  app.setNotFoundHandler((_request, reply) => {
    void reply.code(404).send({ detail: errors.routeNotFound().detail });
  });
}
