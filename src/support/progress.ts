/** Where progress is shown: standard error, or anything with its `write` and `isTTY`. */
export interface ProgressOutput {
  write(text: string): unknown;
  readonly isTTY?: boolean;
}

const BAR_WIDTH = 30;
/** A terminal's bar is redrawn at most this often. */
const REDRAW_MS = 100;

const count = (n: number) => n.toLocaleString('en');

/**
 * The progress of a long command on standard error: a bar redrawn in place on a terminal, plain
 * lines otherwise (one each tenth of the way, and at the end), so that a log or a pipe gets a
 * readable record rather than carriage returns.
 *
 * @example
 *   const progress = new Progress(process.stderr, 'importing', fileSize, 'rows');
 *   progress.update(bytesRead, rowsDone);
 *   progress.done(rowsDone);
 */
export class Progress {
  private lastDraw = Number.NEGATIVE_INFINITY;
  private lastTenth = -1;
  private readonly started: number;
  private readonly cpuAtStart = process.cpuUsage();

  constructor(
    private readonly output: ProgressOutput,
    private readonly label: string,
    /** The whole of what `update`'s `done` counts (bytes of a file, links); unknown when 0. */
    private readonly total: number,
    /** What `items` counts: rows, links. */
    private readonly unit: string,
    /** Milliseconds on a monotonic clock; a test holds it still to see the redraw interval at work. */
    private readonly now: () => number = () => performance.now(),
  ) {
    this.started = now();
  }

  /** `done` of `total` so far, `items` of `unit` finished. */
  update(done: number, items: number): void {
    const fraction = this.total > 0 ? Math.min(done / this.total, 1) : 0;
    if (this.output.isTTY) {
      const now = this.now();
      if (now - this.lastDraw < REDRAW_MS) return;
      this.lastDraw = now;
      const filled = Math.round(fraction * BAR_WIDTH);
      const bar = `${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}`;
      this.output.write(
        `\r${this.label} [${bar}] ${(fraction * 100).toFixed(0).padStart(3)}% ${count(items)} ${this.unit}`,
      );
      return;
    }
    const tenth = Math.floor(fraction * 10);
    if (tenth <= this.lastTenth || tenth >= 10) return;
    this.lastTenth = tenth;
    this.output.write(`${this.label}: ${tenth * 10}% (${count(items)} ${this.unit})\n`);
  }

  /** The last line: how many, how fast, and the CPU time it took (what a busy machine does not change). */
  done(items: number): void {
    const seconds = (this.now() - this.started) / 1000;
    const rate = seconds > 0 ? Math.round(items / seconds) : items;
    const cpu = process.cpuUsage(this.cpuAtStart);
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    const line = `${this.label}: 100% (${count(items)} ${this.unit} in ${seconds.toFixed(1)} s, ${count(rate)} ${this.unit}/s, CPU ${cpuSeconds.toFixed(1)} s)`;
    this.output.write(this.output.isTTY ? `\r${line}\x1b[K\n` : `${line}\n`);
  }
}
