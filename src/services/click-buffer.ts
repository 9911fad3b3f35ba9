import type { OutgoingEvent } from '../domain/events.js';
import type { UrlMappingRepository } from '../ports/url-mapping-repository.js';

/** Mappings per flush transaction: small enough that a write never holds the event loop for long. */
const CHUNK = 100;

export interface ClickBufferLogger {
  error(object: unknown, message: string): void;
}

/**
 * Counts clicks in memory and writes them to the database in batches, so that the redirect
 * path never waits on a write. `pending(id)` gives the clicks not yet visible in the database,
 * so that reads on this instance can add them and see every click at once.
 */
export class ClickBuffer {
  private buffered = new Map<number, number>();
  private inFlight = new Map<number, number>();
  private flushing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private logger: ClickBufferLogger = { error: () => undefined };

  constructor(
    private readonly repository: Pick<UrlMappingRepository, 'addClicks'>,
    private readonly intervalMs: number,
    /** The `url.clicked` batch event of a flush, recorded with it. */
    private readonly clickedEvent?: (clicks: ReadonlyArray<readonly [id: number, count: number]>) => OutgoingEvent,
  ) {}

  /** Starts flushing every interval; failures are logged to `logger` and retried. */
  start(logger: ClickBufferLogger): void {
    this.logger = logger;
    this.timer ??= setInterval(() => void this.flush(), this.intervalMs);
    this.timer.unref();
  }

  /** Stops the timer and writes everything still buffered. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
    if (this.buffered.size > 0) await this.flush();
  }

  record(id: number): void {
    this.buffered.set(id, (this.buffered.get(id) ?? 0) + 1);
  }

  /** Clicks on `id` that the database does not show yet. */
  pending(id: number): number {
    return (this.buffered.get(id) ?? 0) + (this.inFlight.get(id) ?? 0);
  }

  /**
   * Drops the clicks on `id` (its count is being set or the mapping removed), after any write
   * of them already under way has finished, so that write cannot land on top of the new value.
   */
  async discard(id: number): Promise<void> {
    if (this.inFlight.has(id) && this.flushing) await this.flushing;
    this.buffered.delete(id);
  }

  /**
   * Writes the buffered clicks, a chunk per transaction, letting waiting requests in between
   * chunks (SQLite writes block the event loop). Concurrent calls share the write under way.
   */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing.then(() => (this.buffered.size > 0 ? this.flush() : undefined));
    if (this.buffered.size === 0) return Promise.resolve();
    this.inFlight = this.buffered;
    this.buffered = new Map();
    this.flushing = this.writeInFlight()
      .catch((error: unknown) => {
        // Keep what was not written for the next attempt rather than lose it.
        for (const [id, n] of this.inFlight) this.buffered.set(id, (this.buffered.get(id) ?? 0) + n);
        this.logger.error({ err: error, mappings: this.inFlight.size }, 'click flush failed; will retry');
      })
      .finally(() => {
        this.inFlight = new Map();
        this.flushing = undefined;
      });
    return this.flushing;
  }

  private async writeInFlight(): Promise<void> {
    const event = this.clickedEvent;
    // In id order: neighbouring rows share pages, so each chunk touches fewer of them.
    const deltas = [...this.inFlight].sort((a, b) => a[0] - b[0]);
    for (let start = 0; start < deltas.length; start += CHUNK) {
      const chunk = deltas.slice(start, start + CHUNK);
      await this.repository.addClicks(chunk, event && ((written) => [event(written)]));
      for (const [id] of chunk) this.inFlight.delete(id);
      if (start + CHUNK < deltas.length) await new Promise((resolve) => setImmediate(resolve));
    }
  }
}
