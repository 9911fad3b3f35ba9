import { createRequire } from 'node:module';
import { diag, DiagConsoleLogger, DiagLogLevel } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  NodeTracerProvider,
  type ReadableSpan,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { TracingConfig } from '../../config/config.js';
import { stopPropagationWithoutTracing } from './context-propagation.js';
import { PromiseContextManager } from './promise-context-manager.js';
import { installRootSampling, RootSampling } from './root-sampling.js';
import { createRootSampler, withParent } from './samplers.js';

/** Modules whose ESM imports the import-in-the-middle loader must wrap (see `src/instrumentation.ts`). */
export const INSTRUMENTED_MODULES: readonly string[] = ['http', 'https', 'node:http', 'node:https', 'ioredis'];

const SERVICE_VERSION = '0.1.0';

/** The process's tracing, once started. */
export interface Tracing {
  /** False when tracing is off: nothing was installed. */
  readonly enabled: boolean;
  /** Exports what is buffered. */
  forceFlush(): Promise<void>;
  /** Exports what is buffered, then stops recording. */
  shutdown(): Promise<void>;
}

export interface StartTracingOptions {
  /** Receives every span as it ends, instead of the configured destination (tests: an InMemorySpanExporter). */
  readonly exporter?: SpanExporter;
  /** The adaptive sampler's clock. */
  readonly now?: () => number;
}

/**
 * The "no OTLP endpoint" destination: spans are recorded and ended like any others, then let go
 * as they end. Not a batch processor with an exporter that discards: that would keep every
 * span alive until its batch is handed over, long enough for the garbage collector to promote
 * it, and pay for promotions and major collections for spans that go nowhere.
 */
class DroppingSpanProcessor implements SpanProcessor {
  onStart(): void {}
  onEnd(_span: ReadableSpan): void {}
  async forceFlush(): Promise<void> {}
  async shutdown(): Promise<void> {}
}

const OFF: Tracing = Object.freeze({ enabled: false, forceFlush: async () => {}, shutdown: async () => {} });

let current: Tracing | undefined;

/** The tracing started in this process, if any. */
export function currentTracing(): Tracing | undefined {
  return current;
}

/**
 * Starts the OpenTelemetry SDK for this process: W3C trace-context propagation, a client span per
 * outgoing HTTP call (node:http and fetch), Redis spans, and the sampler and destination of the
 * configuration. (Server spans come from the app, see `registerRequestTracing`.) Process-wide, so it starts once: later
 * calls return the first result. With tracing off it installs nothing.
 */
export function startTracing(config: TracingConfig, options: StartTracingOptions = {}): Tracing {
  if (current) return current;
  if (!config.enabled) return (current = OFF);

  diag.setLogger(new DiagConsoleLogger(), DiagLogLevel.ERROR);
  const processor: SpanProcessor = options.exporter
    ? new SimpleSpanProcessor(options.exporter)
    : config.otlpEndpoint === undefined
      ? new DroppingSpanProcessor()
      : new BatchSpanProcessor(new OTLPTraceExporter({ url: `${config.otlpEndpoint.replace(/\/+$/, '')}/v1/traces` }));
  // New traces of incoming requests are decided before any span exists (see RootSampling).
  const root = createRootSampler(config, { now: options.now });
  const roots = new RootSampling(withParent(root), root);
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: config.serviceName,
      [ATTR_SERVICE_VERSION]: SERVICE_VERSION,
    }),
    sampler: roots.sampler,
    idGenerator: roots.idGenerator,
    spanProcessors: [processor],
  });
  // W3C traceparent/tracestate and baggage; promise hooks carry the active span (see PromiseContextManager).
  stopPropagationWithoutTracing();
  provider.register({ contextManager: new PromiseContextManager() });
  installRootSampling(roots);
  const unregister = registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      // Server spans come from the app's own hooks (src/http/plugins/request-tracing.ts), which
      // let the sampler decide before any work is done; node:http is traced for outgoing calls.
      new HttpInstrumentation({ disableIncomingRequestInstrumentation: true }),
      new UndiciInstrumentation(),
      new IORedisInstrumentation(),
    ],
  });
  patchLoadedModules();

  let stopped: Promise<void> | undefined;
  return (current = {
    enabled: true,
    forceFlush: () => provider.forceFlush(),
    shutdown: () =>
      (stopped ??= (async () => {
        installRootSampling(undefined);
        await provider.shutdown();
        unregister();
      })()),
  });
}

/**
 * Requiring the instrumented CommonJS modules once more applies their patches even when they were
 * loaded before tracing started (the `serve` command without `--import`, or a test process): the
 * patches go on shared objects (`http.Server.prototype`, the `http` exports, `Redis.prototype`).
 * ioredis only if it was loaded: a process that never connects to Redis never loads it (see
 * connectRedis), and one that does later is patched as it requires it.
 */
function patchLoadedModules(): void {
  const require = createRequire(import.meta.url);
  for (const name of ['http', 'https']) require(name);
  try {
    if (require.cache[require.resolve('ioredis')] !== undefined) require('ioredis');
  } catch {
    // not installed: nothing to patch
  }
}
