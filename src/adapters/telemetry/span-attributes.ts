import { type Attributes, trace } from '@opentelemetry/api';

/**
 * Attribute names this service adds to request spans (spec §6.2 rule 2) beyond the semantic
 * conventions' own (`client.address`, `http.route`, `enduser.id`).
 */
export const SPAN_ATTRIBUTES = {
  /** Incubating semantic convention, copied as the package advises. */
  enduserId: 'enduser.id',
  executionLanguage: 'execution.language',
  executionScriptLength: 'execution.script.length',
} as const;

/**
 * Adds attributes to the span of the request being handled (the active span), when it records.
 *
 * @example
 *   setRequestSpanAttributes({ [SPAN_ATTRIBUTES.executionLanguage]: 'javascript', [SPAN_ATTRIBUTES.executionScriptLength]: script.length });
 */
export function setRequestSpanAttributes(attributes: Attributes): void {
  const span = trace.getActiveSpan();
  if (span?.isRecording()) span.setAttributes(attributes);
}

/**
 * The pino `mixin` of the app's logger when tracing is on: a line written while a span is active
 * carries its `trace_id` and `span_id`, to go from a log line to its trace.
 */
export function traceLogFields(): Record<string, string> {
  const span = trace.getActiveSpan();
  if (span === undefined) return {};
  const { traceId, spanId, traceFlags } = span.spanContext();
  return { trace_id: traceId, span_id: spanId, trace_flags: traceFlags.toString(16).padStart(2, '0') };
}
