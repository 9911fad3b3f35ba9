import { setTimeout as sleep } from 'node:timers/promises';
import { isDatabaseUnavailable } from './connection-errors.js';

/** How often the start tries the database again while it does not answer. */
const START_RETRY_MS = 1000;

/**
 * Runs `attempt` (the start's first use of the database: its migrations) until it succeeds,
 * trying again every START_RETRY_MS while PostgreSQL cannot be reached (`isDatabaseUnavailable`:
 * the server starting up, restarting, out of connections, slower than the connection deadline),
 * for at most `timeoutMs`, with one last try at the deadline. `onWait` hears the first such
 * failure. Any other error (a refused login, an unknown database, a bug) is thrown at once.
 */
export async function untilDatabaseAnswers<T>(
  attempt: () => Promise<T>,
  timeoutMs: number,
  onWait: (error: unknown) => void,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  let waiting = false;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      const left = deadline - performance.now();
      if (!isDatabaseUnavailable(error) || left <= 0) throw error;
      if (!waiting) onWait(error);
      waiting = true;
      await sleep(Math.min(START_RETRY_MS, left));
    }
  }
}
