import { trace } from '@opentelemetry/api';
import type { MessageTracing } from '../../ports/message-tracing.js';
import { extractedContext, injectedHeaders } from './message-tracing.js';

const tracer = trace.getTracer('urlshortener.events');

/** MessageTracing with OpenTelemetry: W3C trace context in the headers, spans on the global provider. */
export const otelMessageTracing: MessageTracing = {
  continueTrace: (name, headers, work) =>
    tracer.startActiveSpan(name, {}, extractedContext(headers), async (span) => {
      try {
        return await work();
      } finally {
        span.end();
      }
    }),
  headers: injectedHeaders,
};
