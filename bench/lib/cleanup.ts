/**
 * Everything the bench must undo (child processes, temporary files, PostgreSQL schemas) is
 * registered here as soon as it exists, so an error or Ctrl-C anywhere still undoes it.
 */

type Action = () => Promise<void> | void;

const pending: Action[] = [];

function once(action: Action): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => (done ??= Promise.resolve().then(action));
}

async function runQuietly(action: Action): Promise<void> {
  try {
    await action();
  } catch (error) {
    process.stderr.write(`bench: clean-up step failed: ${error instanceof Error ? error.message : String(error)}\n`);
  }
}

/**
 * Registers `action`; returns the function that runs it now (at most once) and forgets it.
 * Whatever is still registered when the bench ends or is interrupted runs then, newest first.
 */
export function registerCleanup(action: Action): () => Promise<void> {
  const run = once(action);
  pending.push(run);
  return async () => {
    const index = pending.indexOf(run);
    if (index >= 0) pending.splice(index, 1);
    await run();
  };
}

/** Runs every registered action, newest first. */
export async function cleanUpAll(): Promise<void> {
  for (let action = pending.pop(); action !== undefined; action = pending.pop()) await runQuietly(action);
}

/** On SIGINT/SIGTERM: clean up, then exit with the conventional status. A second signal exits at once. */
export function cleanUpOnSignals(): void {
  let interrupted = false;
  const onSignal = (signal: NodeJS.Signals, status: number) => {
    if (interrupted) process.exit(status);
    interrupted = true;
    process.stderr.write(`\nbench: ${signal}: stopping servers and removing temporary data...\n`);
    void cleanUpAll().finally(() => process.exit(status));
  };
  process.on('SIGINT', () => onSignal('SIGINT', 130));
  process.on('SIGTERM', () => onSignal('SIGTERM', 143));
}
