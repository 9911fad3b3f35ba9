import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';

/**
 * Lowers the calling thread's CPU priority to `nice` (0 to 19; 0 leaves it as it is). Linux keeps
 * a nice value per thread, and `setpriority(PRIO_PROCESS, tid)` sets one thread's: the thread's
 * id is read from `/proc/thread-self` (`<pid>/task/<tid>`). Raising one's own nice value needs no
 * privilege. Returns why it could not (another system, no `/proc`), or undefined.
 */
export function lowerThreadPriority(nice: number): string | undefined {
  if (nice === 0) return undefined;
  if (process.platform !== 'linux') return `thread priorities are set on Linux only (this is ${process.platform})`;
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isInteger(tid) || tid <= 0) return "could not read this thread's id from /proc/thread-self";
    setPriority(tid, nice);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}
