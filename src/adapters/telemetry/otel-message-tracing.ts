import { context, trace } from '@opentelemetry/api';
import type { MessageTracing } from '../../ports/message-tracing.js';
import { tracing } from './context-propagation.js';
import { extractedContext, injectedHeaders, inProducerSpan } from './message-tracing.js';

const tracer = trace.getTracer('urlshortener.events');

/**
 * MessageTracing with OpenTelemetry: W3C trace context in the headers, spans on the global
 * provider; `system` is the bus's `messaging.system`.
 */
export function otelMessageTracing(system: string): MessageTracing {
  return {
    continueTrace: (name, headers, work) => {
      const parent = extractedContext(headers);
      if (!tracing()) return context.with(parent, work);
      return tracer.startActiveSpan(name, {}, parent, async (span) => {
        try {
          return await work();
        } finally {
          span.end();
        }
      });
    },
    resume: (headers, work) => context.with(extractedContext(headers), work),
    headers: injectedHeaders,
    publish: (message, service, publish) => inProducerSpan(message, service, system, publish),
  };
}
