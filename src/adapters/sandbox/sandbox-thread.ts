import { parentPort, workerData } from 'node:worker_threads';
import type { SandboxLimits } from '../../ports/sandbox.js';
import { runInQuickJs } from './quickjs-runner.js';
import { lowerThreadPriority } from './thread-priority.js';

/** What the pool gives a thread when it starts it (quickjs-sandbox.ts). */
export interface SandboxThreadData {
  /** The thread's nice value (`SANDBOX_NICE`): scripts yield the CPU to the serving thread. */
  readonly nice: number;
}

/** The sandbox thread: runs one script at a time for the pool in the main thread. */
const { nice } = workerData as SandboxThreadData;
const refused = lowerThreadPriority(nice);
if (refused !== undefined) parentPort?.postMessage({ warning: `sandbox thread left at nice 0: ${refused}` });

// `started` when the script's deadline begins (the pool's watchdog counts from there), then the result.
parentPort?.on('message', (job: { id: number; script: string; limits: SandboxLimits }) => {
  void runInQuickJs(job.script, job.limits, () => parentPort?.postMessage({ id: job.id, started: true })).then(
    (result) => parentPort?.postMessage({ id: job.id, result }),
  );
});
