/**
 * Gathers items handed in concurrently and writes them in one batch: when `maxItems` are
 * waiting or `maxWaitMs` after the first. Each `add` resolves once its batch is written (or
 * rejects with the batch's error), so a consumer acknowledges only what is durable.
 */
export class BatchWriter<T> {
  private waiting: { item: T; resolve: () => void; reject: (error: unknown) => void }[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly write: (items: T[]) => Promise<void>,
    private readonly maxItems: number,
    private readonly maxWaitMs: number,
  ) {}

  add(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (this.waiting.length >= this.maxItems) void this.flush();
      else this.timer ??= setTimeout(() => void this.flush(), this.maxWaitMs);
    });
  }

  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.waiting;
    this.waiting = [];
    if (batch.length === 0) return;
    try {
      await this.write(batch.map((b) => b.item));
      for (const b of batch) b.resolve();
    } catch (error) {
      for (const b of batch) b.reject(error);
    }
  }
}
