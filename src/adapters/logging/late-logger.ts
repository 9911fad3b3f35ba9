/** The slice of a pino logger that background parts use. */
export interface BackgroundLogger {
  info(object: unknown, message: string): void;
  warn(object: unknown, message: string): void;
  error(object: unknown, message: string): void;
}

/**
 * A logger for parts built before the app's logger exists (the app is built last): it forwards
 * to the logger given to `attach`; lines before that are dropped.
 */
export function lateLogger(): BackgroundLogger & { attach(target: BackgroundLogger): void } {
  let target: BackgroundLogger | undefined;
  return {
    attach: (logger) => {
      target = logger;
    },
    info: (object, message) => target?.info(object, message),
    warn: (object, message) => target?.warn(object, message),
    error: (object, message) => target?.error(object, message),
  };
}
