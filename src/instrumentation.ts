/**
 * Loaded before the service: `node --import ./dist/instrumentation.js dist/cli.js serve`.
 *
 * Starts tracing before any instrumented module is imported, and registers the
 * import-in-the-middle loader so that ESM imports of those modules are patched too. With tracing
 * off (`OTEL_SDK_DISABLED=true`, or sampling rate 0) it loads nothing. A bad configuration is left
 * to the command itself to report.
 */
import { register } from 'node:module';
import { ConfigError, loadConfig, type Config } from './config/config.js';
import { enableCompileCache } from './support/compile-cache.js';

function configOrUndefined(): Config | undefined {
  try {
    return loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) return undefined;
    throw error;
  }
}

// Before tracing's modules are imported (the command line turns it on again: nothing to undo).
enableCompileCache();

const config = configOrUndefined();
if (config?.tracing.enabled) {
  const { INSTRUMENTED_MODULES, startTracing } = await import('./adapters/telemetry/tracing.js');
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url, {
    data: { include: [...INSTRUMENTED_MODULES] },
  });
  startTracing(config.tracing);
}
