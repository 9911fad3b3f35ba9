import { Worker } from 'node:worker_threads';
import type { Sandbox, SandboxLimits, SandboxResult } from '../../ports/sandbox.js';

/** The thread's own heap (QuickJS memory is capped separately, per run). */
const THREAD_LIMITS = { maxOldGenerationSizeMb: 256 };

/** Extra time the thread gets past the deadline before it is terminated from outside. */
const WATCHDOG_MARGIN_MS = 1000;

/**
 * The QuickJS sandbox: scripts run in a worker thread, so the host's event loop never waits on
 * them, and a watchdog in the host terminates the thread (and starts a new one) if a run outlives
 * its deadline by more than a margin or the thread dies. Runs are queued one at a time per thread.
 */
export class QuickJsSandbox implements Sandbox {
  private worker: Worker | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private nextId = 1;

  run(script: string, limits: SandboxLimits): Promise<SandboxResult> {
    const run = this.queue.then(() => this.runNow(script, limits));
    this.queue = run.catch(() => undefined);
    return run;
  }

  async close(): Promise<void> {
    await this.queue;
    await this.worker?.terminate();
    this.worker = undefined;
  }

  private thread(): Worker {
    if (!this.worker) {
      const compiled = new URL('./sandbox-thread.js', import.meta.url);
      this.worker = import.meta.url.endsWith('.ts')
        ? // Running from TypeScript sources (tests): load the thread through tsx.
          new Worker(
            `import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(
              new URL('./sandbox-thread.ts', import.meta.url).href,
            )}); });`,
            { eval: true, resourceLimits: THREAD_LIMITS },
          )
        : new Worker(compiled, { resourceLimits: THREAD_LIMITS });
      this.worker.unref();
    }
    return this.worker;
  }

  private runNow(script: string, limits: SandboxLimits): Promise<SandboxResult> {
    const worker = this.thread();
    const id = this.nextId++;
    const started = performance.now();
    return new Promise<SandboxResult>((resolve) => {
      const done = (result: SandboxResult) => {
        clearTimeout(watchdog);
        worker.off('message', onMessage);
        worker.off('error', onDeath);
        worker.off('exit', onDeath);
        resolve(result);
      };
      const replaceThread = (status: SandboxResult['status'], error: string) => {
        if (this.worker === worker) this.worker = undefined;
        void worker.terminate();
        done({ status, output: '', result: null, error, durationMs: Math.round(performance.now() - started) });
      };
      const onMessage = (message: { id: number; result: SandboxResult }) => {
        if (message.id === id) done(message.result);
      };
      const onDeath = (error: unknown) =>
        replaceThread('failed', `Sandbox stopped: ${error instanceof Error ? error.message : String(error)}`);
      const watchdog = setTimeout(() => replaceThread('timed_out', 'Timed out'), limits.timeoutMs + WATCHDOG_MARGIN_MS);
      worker.on('message', onMessage);
      worker.once('error', onDeath);
      worker.once('exit', onDeath);
      worker.postMessage({ id, script, limits });
    });
  }
}
