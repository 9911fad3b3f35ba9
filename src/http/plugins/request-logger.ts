import type { FastifyBaseLogger, FastifyServerOptions } from 'fastify';
import type { Bindings, ChildLoggerOptions, LevelWithSilentOrString } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type LogCall = (...args: unknown[]) => void;
/** What the lazy logger needs of its parent: pino's logger. */
type Parent = FastifyBaseLogger & { isLevelEnabled(level: LevelWithSilentOrString): boolean };

/**
 * A request's logger that makes its pino child (which serialises the request id into a string
 * of bindings) only when the request logs a line at an enabled level. Most requests log none:
 * the redirect path logs per request only at `debug`, and making the child for each of them
 * cost more than the rest of the request's own work.
 */
class LazyRequestLogger implements FastifyBaseLogger {
  #child: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: Parent,
    private readonly bindings: Bindings,
  ) {}

  get level(): string {
    return this.#child?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.real().level = level;
  }

  fatal(...args: unknown[]): void {
    this.log('fatal', args);
  }

  error(...args: unknown[]): void {
    this.log('error', args);
  }

  warn(...args: unknown[]): void {
    this.log('warn', args);
  }

  info(...args: unknown[]): void {
    this.log('info', args);
  }

  debug(...args: unknown[]): void {
    this.log('debug', args);
  }

  trace(...args: unknown[]): void {
    this.log('trace', args);
  }

  silent(): void {}

  isLevelEnabled(level: LevelWithSilentOrString): boolean {
    const child = this.#child as Parent | undefined;
    return (child ?? this.parent).isLevelEnabled(level);
  }

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real().child(bindings, options);
  }

  private real(): FastifyBaseLogger {
    return (this.#child ??= this.parent.child(this.bindings));
  }

  private log(level: Level, args: unknown[]): void {
    if (this.#child === undefined && !this.parent.isLevelEnabled(level)) return;
    (this.real()[level] as LogCall)(...args);
  }
}

/**
 * Fastify's `childLoggerFactory`: a lazy child for the common case, pino's own child when the
 * route sets a level or serializers of its own (or the logger is not pino).
 */
export const lazyRequestLogger: NonNullable<FastifyServerOptions['childLoggerFactory']> = function (
  logger,
  bindings,
  options,
) {
  const parent = logger as Partial<Parent>;
  const plain = options.level === undefined && options.serializers === undefined;
  if (!plain || typeof parent.isLevelEnabled !== 'function') return logger.child(bindings, options);
  return new LazyRequestLogger(parent as Parent, bindings);
};

/** Whether `logger` writes lines at `level` (true for a logger that cannot say). */
export function logsAt(logger: FastifyBaseLogger, level: Level): boolean {
  const { isLevelEnabled } = logger as Partial<Parent>;
  return typeof isLevelEnabled !== 'function' || isLevelEnabled.call(logger, level);
}
