import { type DestinationStream, type Logger, type LoggerOptions, pino } from 'pino';
import { traceLogFields } from '../adapters/telemetry/span-attributes.js';
import type { Config } from '../config/config.js';

/**
 * How the caller wants the service to log: `false` for not at all (tests), pino options (and a
 * stream) instead of the configured ones, or a pino logger to use as it is. Absent: LOG_LEVEL.
 */
export type LoggerChoice = false | (LoggerOptions & { readonly stream?: DestinationStream }) | Logger;

/** Credentials a request may carry: never written to the logs. */
const REDACT = ['req.headers.cookie', 'req.headers.authorization', 'req.headers["x-csrf-token"]'];

function isLogger(choice: LoggerChoice): choice is Logger {
  return typeof (choice as Partial<Logger>).child === 'function';
}

/** The process's logger, made before anything else so that every part logs to it from the start. */
export function createLogger(config: Config, choice?: LoggerChoice): Logger {
  if (choice === false) return pino({ level: 'silent' });
  if (choice !== undefined && isLogger(choice)) return choice;
  if (choice !== undefined) {
    const { stream, ...options } = choice;
    return pino({ redact: REDACT, ...options }, stream);
  }
  return pino({
    level: config.logLevel,
    redact: REDACT,
    ...(config.tracing.enabled ? { mixin: traceLogFields } : {}),
  });
}
