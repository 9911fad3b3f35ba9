import { parentPort } from 'node:worker_threads';
import type { SandboxLimits } from '../../ports/sandbox.js';
import { runInQuickJs } from './quickjs-runner.js';

/** The sandbox thread: runs one script at a time for the pool in the main thread. */
parentPort?.on('message', (job: { id: number; script: string; limits: SandboxLimits }) => {
  void runInQuickJs(job.script, job.limits).then((result) => parentPort?.postMessage({ id: job.id, result }));
});
