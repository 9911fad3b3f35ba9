import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * The thread's whole program: its own connection to the database file, a PASSIVE checkpoint
 * every interval (it copies committed WAL frames into the database file and waits for no reader
 * or writer), and a last one when asked to stop. Small enough to be handed over as text, so the
 * same code runs from the sources (tests) and from the build.
 *
 * A PASSIVE checkpoint never starts the WAL over: only a writer does, and only if every frame was
 * copied when its transaction began, which under a steady stream of commits (a busy service
 * commits every few milliseconds) is almost never so. The WAL then grew until the serving
 * connection's fallback checkpointed it on the event loop (see FALLBACK_AUTOCHECKPOINT_PAGES),
 * whose sync of the database file held every request for about 100 ms, every 400 ms, under the
 * uniform mix over 10,000,000 links (bench/PROFILE.md). So once the WAL holds RESTART_FRAMES
 * frames, the PASSIVE checkpoint is followed by a RESTART one: it waits (here, in this thread)
 * for the writer's transaction under way, then keeps new ones waiting while it copies the few
 * frames committed since the PASSIVE one and syncs, so that the next writer starts the WAL over.
 * Meanwhile it raises `wants` (shared memory), and the serving connection begins no transaction
 * while it is up (`wantsLock`): left to SQLite's busy handler, the thread slept while the serving
 * connection took the lock again and again (transactions back to back, under load) and rarely got
 * it, and the WAL grew to the fallback after all.
 */
const THREAD_PROGRAM = `
const { parentPort, workerData } = require('node:worker_threads');
const SQLite = require(workerData.driver);
const db = new SQLite(workerData.file, { timeout: workerData.busyTimeoutMs });
const wants = new Int32Array(workerData.wants);
const checkpoint = () => {
  try {
    const [passive] = db.pragma('wal_checkpoint(PASSIVE)');
    if (passive && passive.log >= workerData.restartFrames) {
      Atomics.store(wants, 0, 1);
      db.pragma('wal_checkpoint(RESTART)');
    }
  } catch {
    // Another checkpoint under way, or the file is going away: the next tick tries again.
  } finally {
    Atomics.store(wants, 0, 0);
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

/** Frames (pages) in the WAL from which the thread starts it over (a RESTART checkpoint): 16 MB of 4 KB pages. */
export const RESTART_FRAMES = 4_096;

/** How long the thread's RESTART checkpoint waits for a writer or a reader to finish before it tries again next time. */
const BUSY_TIMEOUT_MS = 1_000;

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
  /** 1 while the thread wants the write lock (see THREAD_PROGRAM), in memory both threads see. */
  private readonly wants = new Int32Array(new SharedArrayBuffer(4));
  private readonly exited: Promise<void>;

  constructor(file: string, intervalMs: number) {
    this.worker = new Worker(THREAD_PROGRAM, {
      eval: true,
      workerData: {
        file,
        intervalMs,
        wants: this.wants.buffer,
        restartFrames: RESTART_FRAMES,
        busyTimeoutMs: BUSY_TIMEOUT_MS,
        driver: createRequire(import.meta.url).resolve('better-sqlite3'),
      },
    });
    this.worker.unref();
    // A thread that dies leaves the fallback in charge; the service keeps serving.
    this.worker.on('error', () => undefined);
    this.exited = new Promise((resolve) => this.worker.once('exit', () => resolve()));
  }

  /** Whether the thread is about to take the write lock, or holds it, to start the WAL over. */
  wantsLock(): boolean {
    return Atomics.load(this.wants, 0) === 1;
  }

  /** A last checkpoint, then the thread ends. */
  async stop(): Promise<void> {
    const stopped = new Promise<void>((resolve) => this.worker.once('message', () => resolve()));
    this.worker.postMessage('stop');
    await Promise.race([stopped, this.exited]);
    await this.worker.terminate();
  }
}
