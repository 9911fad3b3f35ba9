export interface DisposerLogger {
  error(object: unknown, message: string): void;
}

/**
 * What the composition opened, closed in reverse: each resource registers its `close` as it
 * opens, so the last opened closes first and nothing is kept in a hand-written shutdown list.
 * Every disposer runs even when an earlier one failed (a database already gone, a broker away);
 * failures are logged. In the spirit of `AsyncDisposableStack`, which Node 20 does not have.
 *
 * @example
 *   const stack = new DisposerStack(logger);
 *   const database = stack.use('database', openDatabase(config.database));
 *   stack.defer('click flush', () => clicks.stop());
 *   await stack.dispose(); // click flush, then database
 */
export class DisposerStack {
  private readonly disposers: { readonly name: string; readonly dispose: () => unknown }[] = [];
  private disposing: Promise<void> | undefined;

  constructor(private readonly logger: DisposerLogger) {}

  /** Registers `dispose` under `name` (named in the log when it fails). */
  defer(name: string, dispose: () => unknown): void {
    if (this.disposing) throw new Error(`${name}: registered after the stack was disposed`);
    this.disposers.push({ name, dispose });
  }

  /** Registers `resource.close()` and hands the resource back. */
  use<T extends { close(): unknown }>(name: string, resource: T): T {
    this.defer(name, () => resource.close());
    return resource;
  }

  /** Runs every disposer, last registered first. Idempotent: later calls wait for the first. */
  dispose(): Promise<void> {
    return (this.disposing ??= this.unwind());
  }

  private async unwind(): Promise<void> {
    for (const { name, dispose } of this.disposers.splice(0).reverse()) {
      try {
        await dispose();
      } catch (error) {
        this.logger.error({ err: error, step: name }, 'shutdown step failed');
      }
    }
  }
}
