import type { Config } from './config/config.js';
import { compose, type Service } from './composition/compose.js';
import { retainTickShapes } from './support/tick-shapes.js';

export interface ServeOptions {
  /** Another way to ask for the graceful stop (a cluster's primary): `stop` does nothing once one is under way. */
  readonly onStopRequest?: (stop: () => void) => void;
}

/** Starts the service and stops it gracefully on SIGTERM/SIGINT. */
export async function serve(config: Config, options: ServeOptions = {}): Promise<Service> {
  retainTickShapes();
  // Normally started already by `--import ./dist/instrumentation.js`; this covers a bare `urlshortener serve`.
  const tracing = config.tracing.enabled
    ? (await import('./adapters/telemetry/tracing.js')).startTracing(config.tracing)
    : undefined;
  const service = await compose(config);
  const { app } = service;
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      app.log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    app.log.info({ signal }, 'shutting down: finishing requests, flushing clicks');
    const force = setTimeout(() => {
      app.log.error({ timeoutMs: config.shutdownTimeoutMs }, 'shutdown timed out; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs);
    force.unref();
    service
      .close()
      .then(() => tracing?.shutdown()) // exports the spans still buffered
      .then(
        () => {
          app.log.info('shut down cleanly');
          process.exit(0);
        },
        (error: unknown) => {
          app.log.error({ err: error }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    // The address is taken (or not ours): nothing was served; close what started, then say so.
    process.off('SIGTERM', stop).off('SIGINT', stop);
    await service.close().catch(() => undefined);
    await tracing?.shutdown();
    throw error;
  }
  options.onStopRequest?.(() => {
    if (!stopping) stop('SIGTERM');
  });
  return service;
}
