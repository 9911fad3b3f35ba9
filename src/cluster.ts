import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { serveCounters } from './adapters/counters/cluster-counters.js';
import { MemoryCounters } from './adapters/counters/memory-counters.js';
import type { Role } from './config/config.js';

/** The message a primary sends its workers to stop them gracefully. */
const STOP_MESSAGE = 'urlshortener:stop';

/** A worker that dies sooner than this after its start is restarted after RESTART_BACKOFF_MS, not at once. */
const QUICK_DEATH_MS = 5_000;
const RESTART_BACKOFF_MS = 1_000;

/**
 * The role of the serving process at `index`: the first runs the configured role, so the
 * consumers that must run once (the event store, the executor, the notifier, the dead-letter
 * manager, retention) run once; the others serve the HTTP API, each with its own redirect cache
 * kept in step by the `url.*` events as separate instances are. With `worker`, all run consumers
 * (the members of a consumer group share its partitions).
 */
export function workerRole(role: Role, index: number): Role {
  return index === 0 || role === 'worker' ? role : 'api';
}

export interface PrimaryOptions {
  readonly workers: number;
  readonly role: Role;
  /** Every worker's own graceful shutdown; the primary waits a little longer, then kills. */
  readonly shutdownTimeoutMs: number;
  readonly logger: Logger;
  /** The command line of a worker, `serve --role R --workers 1` with R its role. */
  readonly workerArgs: (role: Role) => string[];
}

/**
 * The primary of `serve --workers N`: it serves nothing itself. It forks N serving processes,
 * which share the listening port (the primary hands connections round-robin), restarts one that
 * dies (and logs it), and on SIGTERM or SIGINT asks each to stop gracefully and waits for all of
 * them. The request is a message, not a signal: a service manager or a terminal often signals the
 * whole process group, and a worker takes a second signal as "exit at once". A second signal to
 * the primary is forwarded as SIGTERM, which the workers (stopping already) take so. Resolves
 * with the exit code.
 */
export function runPrimary(options: PrimaryOptions): Promise<number> {
  return new Promise<number>((resolve) => {
    const primary = new Primary(options, resolve);
    cluster.on('exit', (worker, code, signal) => primary.exited(worker, code, signal));
    process.on('SIGTERM', (signal) => primary.stop(signal));
    process.on('SIGINT', (signal) => primary.stop(signal));
    for (let index = 0; index < options.workers; index++) primary.fork(index);
  });
}

/** The serving processes of a primary and what it does when one exits or a signal comes. */
class Primary {
  private readonly workers = new Map<Worker, { index: number; startedAt: number; listening: boolean }>();
  private stopping = false;
  private failed = false;
  // Without Redis, the workers' counters (the settings-change signal) are kept here, for all of them.
  private readonly counters = new MemoryCounters();

  constructor(
    private readonly options: PrimaryOptions,
    private readonly done: (code: number) => void,
  ) {}

  fork(index: number): void {
    const role = workerRole(this.options.role, index);
    cluster.setupPrimary({ args: this.options.workerArgs(role) });
    const worker = cluster.fork();
    serveCounters(this.counters, worker);
    const entry = { index, startedAt: performance.now(), listening: false };
    this.workers.set(worker, entry);
    worker.once('listening', () => {
      entry.listening = true;
      if (this.stopping) worker.send(STOP_MESSAGE);
    });
    this.options.logger.info({ worker: index, workerPid: worker.process.pid, role }, 'serving process started');
  }

  exited(worker: Worker, code: number, signal: string): void {
    const entry = this.workers.get(worker);
    this.workers.delete(worker);
    if (entry === undefined) return;
    const { index, startedAt } = entry;
    const { logger } = this.options;
    if (this.stopping) {
      if (code !== 0) this.failed = true;
      logger.info({ worker: index, workerPid: worker.process.pid, code, signal }, 'serving process stopped');
      if (this.workers.size === 0) this.done(this.failed ? 1 : 0);
      return;
    }
    const delay = performance.now() - startedAt < QUICK_DEATH_MS ? RESTART_BACKOFF_MS : 0;
    logger.error(
      { worker: index, workerPid: worker.process.pid, code, signal, restartInMs: delay },
      'serving process died; restarting it',
    );
    setTimeout(() => {
      if (!this.stopping) this.fork(index);
    }, delay).unref();
  }

  stop(signal: NodeJS.Signals): void {
    const again = this.stopping;
    this.stopping = true;
    this.options.logger.info(
      { signal, workers: this.workers.size },
      again ? 'second signal: stopping the workers now' : 'stopping the workers',
    );
    if (this.workers.size === 0) this.done(this.failed ? 1 : 0);
    for (const [worker, { listening }] of this.workers) {
      if (again) worker.process.kill('SIGTERM');
      // One still starting is asked once it listens (it could miss an earlier message).
      else if (listening) worker.send(STOP_MESSAGE);
    }
    if (again) return;
    setTimeout(() => {
      for (const worker of this.workers.keys()) worker.process.kill('SIGKILL');
      this.options.logger.error('workers did not stop in time; killed');
    }, this.options.shutdownTimeoutMs + 2_000).unref();
  }
}

/**
 * In a worker, as early as possible: records the primary's request to stop, even one that comes
 * while the service is still starting, and hands it to the `stop` given later.
 */
export function primaryStopRequests(): (stop: () => void) => void {
  let requested = false;
  let onStop: (() => void) | undefined;
  process.on('message', (message) => {
    if (message !== STOP_MESSAGE) return;
    requested = true;
    onStop?.();
  });
  return (stop) => {
    onStop = stop;
    if (requested) stop();
  };
}
