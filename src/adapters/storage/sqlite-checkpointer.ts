import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * The thread's whole program: its own connection to the database file, a PASSIVE checkpoint
 * every interval (it copies committed WAL frames into the database file and waits for no reader
 * or writer), and a last one when asked to stop. Small enough to be handed over as text, so the
 * same code runs from the sources (tests) and from the build.
 */
const THREAD_PROGRAM = `
const { parentPort, workerData } = require('node:worker_threads');
const SQLite = require(workerData.driver);
const db = new SQLite(workerData.file);
const checkpoint = () => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // Another checkpoint under way, or the file is going away: the next tick tries again.
  }
};
const timer = setInterval(checkpoint, workerData.intervalMs);
parentPort.on('message', () => {
  clearInterval(timer);
  checkpoint();
  db.close();
  parentPort.postMessage('stopped');
});
`;

/** Pages the serving connection lets the WAL reach before it checkpoints itself (only if this thread falls behind). */
export const FALLBACK_AUTOCHECKPOINT_PAGES = 16_384;

/**
 * Checkpoints a SQLite database in WAL mode from a thread of its own. A checkpoint copies pages
 * into the database file and syncs it to disk; done by the serving connection (SQLite's
 * auto-checkpoint), that waits on the disk while requests wait on the event loop. Commits do not
 * depend on it: a committed transaction is in the WAL, which survives a crash of the process.
 * The serving connection keeps an auto-checkpoint far above what this thread lets the WAL reach,
 * as a fallback should the thread fall behind.
 */
export class SqliteCheckpointer {
  private readonly worker: Worker;
  private readonly exited: Promise<void>;

  constructor(file: string, intervalMs: number) {
    this.worker = new Worker(THREAD_PROGRAM, {
      eval: true,
      workerData: { file, intervalMs, driver: createRequire(import.meta.url).resolve('better-sqlite3') },
    });
    this.worker.unref();
    // A thread that dies leaves the fallback in charge; the service keeps serving.
    this.worker.on('error', () => undefined);
    this.exited = new Promise((resolve) => this.worker.once('exit', () => resolve()));
  }

  /** A last checkpoint, then the thread ends. */
  async stop(): Promise<void> {
    const stopped = new Promise<void>((resolve) => this.worker.once('message', () => resolve()));
    this.worker.postMessage('stop');
    await Promise.race([stopped, this.exited]);
    await this.worker.terminate();
  }
}
