import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { type AppError, errors } from '../domain/errors.js';

function errorFor(code: string | undefined): AppError {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return errors.requestTimeout();
  if (code === 'HPE_HEADER_OVERFLOW') return errors.headersTooLarge();
  return errors.malformedRequest();
}

/**
 * Errors on a connection before a request reaches a route: a request (or its headers) that did
 * not arrive within `REQUEST_TIMEOUT_MS`/`HEADERS_TIMEOUT_MS`, headers too large, bytes that are
 * not HTTP. Answered `{detail}` like every other error, then the connection is closed.
 */
export function clientErrorHandler(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Duplex): void {
  // A reset connection, or one already gone: nobody to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const appError = errorFor(error.code);
  this.log.debug({ err: error, statusCode: appError.statusCode }, 'client connection error');
  if (socket.writable) {
    const body = JSON.stringify({ detail: appError.detail });
    socket.write(
      `HTTP/1.1 ${appError.statusCode} ${STATUS_CODES[appError.statusCode]}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}
