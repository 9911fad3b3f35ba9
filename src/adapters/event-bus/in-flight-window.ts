/**
 * The places of a subscription with `concurrency` (SubscribeOptions): a message takes one before
 * it is fetched and gives it back once handled, so at most `size` are in flight at once.
 */
export class InFlightWindow {
  private used = 0;
  private readonly waiters: ((granted: boolean) => void)[] = [];
  private closed = false;
  private readonly deliveries = new Set<Promise<unknown>>();

  constructor(readonly size: number) {}

  /** Resolves true once a place is taken; false when the window was closed (take nothing more). */
  acquire(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (this.used < this.size) {
      this.used++;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Gives a place back, straight to whoever waits for one. */
  release(): void {
    const next = this.closed ? undefined : this.waiters.shift();
    if (next) next(true);
    else this.used--;
  }

  /** Runs `delivery` in the place taken, and gives the place back when it settles. */
  start(delivery: () => Promise<unknown>): void {
    const running: Promise<unknown> = delivery()
      .catch(() => undefined)
      .finally(() => {
        this.deliveries.delete(running);
        this.release();
      });
    this.deliveries.add(running);
  }

  /** Stops handing out places; resolves once every delivery started has settled. */
  async close(): Promise<void> {
    this.closed = true;
    for (const waiter of this.waiters.splice(0)) waiter(false);
    while (this.deliveries.size > 0) await Promise.all(this.deliveries);
  }
}
