/** The slice of a pino logger that background parts use. */
export interface BackgroundLogger {
  info(object: unknown, message: string): void;
  warn(object: unknown, message: string): void;
  error(object: unknown, message: string): void;
}

/** Lines kept until the logger is attached; beyond this, the earliest are kept. */
const EARLY_LINES = 100;

/**
 * A logger for parts built before the app's logger exists (the app is built last): it forwards
 * to the logger given to `attach`; the first lines before that are kept and written on attach
 * (a backend already away at start-up is said once, not lost).
 */
export function lateLogger(): BackgroundLogger & { attach(target: BackgroundLogger): void } {
  let target: BackgroundLogger | undefined;
  const early: Array<[keyof BackgroundLogger, unknown, string]> = [];
  const line = (level: keyof BackgroundLogger) => (object: unknown, message: string) => {
    if (target) target[level](object, message);
    else if (early.length < EARLY_LINES) early.push([level, object, message]);
  };
  return {
    attach: (logger) => {
      target = logger;
      for (const [level, object, message] of early.splice(0)) logger[level](object, message);
    },
    info: line('info'),
    warn: line('warn'),
    error: line('error'),
  };
}
