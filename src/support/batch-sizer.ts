export interface BatchSizerOptions {
  /** The size of the first batch. */
  readonly initial: number;
  readonly min: number;
  readonly max: number;
  /** How long a batch should take, about: no longer, since it holds the event loop meanwhile. */
  readonly targetMs: number;
}

/**
 * The size of the next batch of a job done in batches, from how long the last one took. A
 * batch that took longer than the target makes the next one smaller in proportion; a full one
 * (as large as asked) that took under half of it makes the next a quarter larger. A batch that
 * was small only because little was left says nothing about a full one's time, and grows nothing:
 * the last batch of every run, and every batch of a quiet spell, grew the size until the next
 * busy run's first batch held the loop several times the target (bench/PROFILE.md).
 *
 * What it is for: work that runs synchronously once started (a SQLite transaction through
 * better-sqlite3, the JavaScript of a fold) keeps every request waiting for as long as it takes,
 * and the right batch size for a few milliseconds depends on the data (many visits a link, or
 * one) and on the machine.
 *
 * @example
 *   const sizer = new BatchSizer({ initial: 50, min: 1, max: 1000, targetMs: 2 });
 *   const started = performance.now();
 *   const done = await foldSome(sizer.size);
 *   sizer.took(performance.now() - started, done === sizer.size);
 */
export class BatchSizer {
  private current: number;

  constructor(private readonly options: BatchSizerOptions) {
    this.current = clamp(options.initial, options.min, options.max);
  }

  get size(): number {
    return this.current;
  }

  /**
   * How long the last batch took, in milliseconds; `full`: it was as large as asked (`size`), not
   * cut short because nothing more was waiting.
   */
  took(ms: number, full = true): void {
    const { targetMs, min, max } = this.options;
    if (ms > targetMs) this.current = clamp(Math.floor((this.current * targetMs) / ms), min, max);
    else if (ms < targetMs / 2 && full) this.current = clamp(Math.ceil(this.current * 1.25), min, max);
  }
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}
