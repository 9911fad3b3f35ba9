export interface PeriodicTaskLogger {
  warn(object: unknown, message: string): void;
}

/**
 * Runs `task` every `intervalMs` in the background, one run at a time. A failing run is logged
 * once per run of failures and tried again at the next tick; the process never stops for it.
 */
export class PeriodicTask {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private failing = false;

  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly task: () => Promise<unknown>,
    private readonly logger: PeriodicTaskLogger,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.run(), this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One run now (unless one is under way). */
  run(): Promise<void> {
    this.running ??= this.task()
      .then(() => {
        this.failing = false;
      })
      .catch((error: unknown) => {
        if (!this.failing) this.logger.warn({ err: error, task: this.name }, `${this.name} failed; will retry`);
        this.failing = true;
      })
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }
}
