/** Tries at a write that records a side effect, a little further apart each (1 s in all). */
const ATTEMPTS = 5;
const PAUSE_MS = 100;

/**
 * Runs `record`, the write that records a side effect just made outside the database (a message
 * published, a webhook sent), again when it fails for a moment (a dropped connection): left
 * unrecorded, the side effect would be made a second time when its work is retried. Gives up with
 * the last error after five tries over about a second.
 */
export async function recordSideEffect<T>(record: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await record();
    } catch (error) {
      if (attempt === ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, PAUSE_MS * attempt));
    }
  }
}
