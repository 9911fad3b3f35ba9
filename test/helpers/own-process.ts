/** Processes the tests start (servers of their own): killed when the test process exits, whatever happened. */
const pids = new Map<number, NodeJS.Signals>();
let hooked = false;

/** Sends `signal` to `pid` when this process exits (unless `forget` was called first). */
export function killOnExit(pid: number, signal: NodeJS.Signals = 'SIGKILL'): void {
  pids.set(pid, signal);
  if (hooked) return;
  hooked = true;
  process.once('exit', () => {
    for (const [p, s] of pids) {
      try {
        process.kill(p, 'SIGCONT'); // a paused process would not act on the signal
        process.kill(p, s);
      } catch {
        // already gone
      }
    }
  });
}

export function forget(pid: number): void {
  pids.delete(pid);
}
