import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Sandbox, SandboxLimits, SandboxResult } from '../../ports/sandbox.js';
import { PACKAGE_ROOT } from '../../support/package-root.js';
import type { SandboxThreadData } from './sandbox-thread.js';

/** The thread's own heap (QuickJS memory is capped separately, per run). */
const THREAD_LIMITS = { maxOldGenerationSizeMb: 256 };

/**
 * The thread's program in the build: an entry point of its own (scripts/bundle.mjs), at the path
 * its source has under `src/`, wherever the bundler put this module.
 */
const THREAD_PROGRAM = join(PACKAGE_ROOT, 'dist', 'adapters', 'sandbox', 'sandbox-thread.js');

/** Extra time the thread gets past the deadline before it is terminated from outside. */
const WATCHDOG_MARGIN_MS = 1000;
/**
 * How long a thread may take to begin a run it was handed (a new thread loads its program and
 * QuickJS first) before it is taken for stuck and replaced. The script's deadline starts when it
 * begins: a thread's start-up, seconds on a loaded machine, is not the script's time.
 */
const START_LIMIT_MS = 30_000;

interface Job {
  readonly script: string;
  readonly limits: SandboxLimits;
  readonly resolve: (result: SandboxResult) => void;
}

/** One sandbox thread of the pool: started on first use, replaced when it is terminated. */
interface Slot {
  worker: Worker | undefined;
  busy: boolean;
}

export interface QuickJsSandboxOptions {
  /**
   * The threads' nice value, 0 to 19 (`SANDBOX_NICE`): above 0, where the CPU is busy a script
   * gets a smaller share of it than the process's other threads (serving requests, consumers) and
   * the machine's processes of lower nice value (at 10, about a tenth of a thread at 0). On Linux
   * only; elsewhere the threads stay at the process's priority.
   */
  readonly nice?: number;
  /** Told once if a thread's priority could not be set (it runs at the process's priority). */
  readonly onWarning?: (message: string) => void;
  /**
   * The threads' program, in place of the build's (or the sources' through tsx): for tests, one
   * that starts late and then loads the real one.
   */
  readonly threadProgram?: URL;
}

/**
 * The QuickJS sandbox: a pool of `concurrency` worker threads, each running one script at a
 * time, so the host's event loop never waits on them and one long script does not hold up the
 * others. A watchdog in the host terminates a thread (and starts a new one) if a run outlives
 * its deadline by more than a margin, counted from when the thread begins it, if the thread does
 * not begin it within START_LIMIT_MS, or if the thread dies. Runs beyond the pool wait, in order.
 */
export class QuickJsSandbox implements Sandbox {
  private readonly slots: Slot[];
  private readonly waiting: Job[] = [];
  private readonly running = new Set<Promise<void>>();
  private nextId = 1;
  private readonly threadData: SandboxThreadData;
  private warned = false;

  constructor(
    readonly concurrency = 1,
    private readonly options: QuickJsSandboxOptions = {},
  ) {
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError('concurrency must be at least 1');
    const nice = options.nice ?? 0;
    if (!Number.isInteger(nice) || nice < 0 || nice > 19) throw new RangeError('nice must be 0 to 19');
    this.threadData = { nice };
    this.slots = Array.from({ length: concurrency }, () => ({ worker: undefined, busy: false }));
  }

  run(script: string, limits: SandboxLimits): Promise<SandboxResult> {
    return new Promise((resolve) => {
      this.waiting.push({ script, limits, resolve });
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    while (this.running.size > 0) await Promise.all(this.running);
    await Promise.all(this.slots.map((slot) => slot.worker?.terminate()));
    for (const slot of this.slots) slot.worker = undefined;
  }

  /** Starts waiting jobs on free threads. */
  private dispatch(): void {
    for (const slot of this.slots) {
      if (this.waiting.length === 0) return;
      if (slot.busy) continue;
      const job = this.waiting.shift()!;
      slot.busy = true;
      const run = this.runOn(slot, job.script, job.limits).then((result) => {
        slot.busy = false;
        this.running.delete(run);
        job.resolve(result);
        this.dispatch();
      });
      this.running.add(run);
    }
  }

  private thread(slot: Slot): Worker {
    if (!slot.worker) {
      const program = this.options.threadProgram;
      const options = { resourceLimits: THREAD_LIMITS, workerData: this.threadData };
      slot.worker = program
        ? new Worker(program, options)
        : import.meta.url.endsWith('.ts')
          ? // Running from TypeScript sources (tests): load the thread through tsx.
            new Worker(
              `import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(
                new URL('./sandbox-thread.ts', import.meta.url).href,
              )}); });`,
              { ...options, eval: true },
            )
          : new Worker(THREAD_PROGRAM, options);
      slot.worker.on('message', (message: { warning?: string }) => {
        if (message.warning === undefined || this.warned) return;
        this.warned = true;
        this.options.onWarning?.(message.warning);
      });
      slot.worker.unref();
    }
    return slot.worker;
  }

  private runOn(slot: Slot, script: string, limits: SandboxLimits): Promise<SandboxResult> {
    const worker = this.thread(slot);
    const id = this.nextId++;
    let started = performance.now();
    return new Promise<SandboxResult>((resolve) => {
      const done = (result: SandboxResult) => {
        clearTimeout(watchdog);
        worker.off('message', onMessage);
        worker.off('error', onDeath);
        worker.off('exit', onDeath);
        resolve(result);
      };
      const replaceThread = (status: SandboxResult['status'], error: string) => {
        if (slot.worker === worker) slot.worker = undefined;
        void worker.terminate();
        const durationMs = Math.round(performance.now() - started);
        done({ status, output: '', result: null, error, truncated: false, durationMs });
      };
      const onMessage = (message: { id: number; started?: true; result?: SandboxResult }) => {
        if (message.id !== id) return;
        if (message.result !== undefined) return done(message.result);
        // Begun: from here the script's deadline, and the watchdog's margin past it.
        started = performance.now();
        clearTimeout(watchdog);
        watchdog = setTimeout(() => replaceThread('timed_out', 'Timed out'), limits.timeoutMs + WATCHDOG_MARGIN_MS);
      };
      const onDeath = (error: unknown) =>
        replaceThread('failed', `Sandbox stopped: ${error instanceof Error ? error.message : String(error)}`);
      let watchdog = setTimeout(
        () => replaceThread('failed', `Sandbox thread did not begin the run within ${START_LIMIT_MS / 1000} s`),
        START_LIMIT_MS,
      );
      worker.on('message', onMessage);
      worker.once('error', onDeath);
      worker.once('exit', onDeath);
      worker.postMessage({ id, script, limits });
    });
  }
}
