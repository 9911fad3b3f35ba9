/**
 * `incomingContext` reads a plain version-00 `traceparent` without the W3C propagator's regular
 * expressions: for every carrier below, valid or not, with or without `tracestate` and `baggage`,
 * the context it gives holds the same span context and baggage as the propagator's own
 * extraction (W3C trace context and baggage, as tracing installs them; and W3C trace context
 * alone, as with tracing off). (Without a `traceparent` it gives the root context by design, baggage
 * or not: it reads trace context.)
 */
import { propagation, ROOT_CONTEXT, trace, type TextMapPropagator } from '@opentelemetry/api';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { afterEach, describe, expect, it } from 'vitest';
import { incomingContext, plainTraceparent } from '../../src/adapters/telemetry/context-propagation.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';

const TRACEPARENTS = [
  `00-${TRACE_ID}-${SPAN_ID}-01`,
  `00-${TRACE_ID}-${SPAN_ID}-00`,
  `00-${TRACE_ID}-${SPAN_ID}-ff`,
  `00-${TRACE_ID}-${SPAN_ID}-09`,
  `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01`,
  `00-${TRACE_ID}-${SPAN_ID.toUpperCase()}-01`,
  `00-${TRACE_ID}-${SPAN_ID}-0F`,
  `00-${'0'.repeat(32)}-${SPAN_ID}-01`,
  `00-${TRACE_ID}-${'0'.repeat(16)}-01`,
  `ff-${TRACE_ID}-${SPAN_ID}-01`,
  `01-${TRACE_ID}-${SPAN_ID}-01`,
  `01-${TRACE_ID}-${SPAN_ID}-01-extra`,
  `00-${TRACE_ID}-${SPAN_ID}-01-extra`,
  ` 00-${TRACE_ID}-${SPAN_ID}-01`,
  `00-${TRACE_ID}-${SPAN_ID}-01 `,
  `00-${TRACE_ID}-${SPAN_ID}_01`,
  `00_${TRACE_ID}-${SPAN_ID}-01`,
  `00-${TRACE_ID.slice(1)}g-${SPAN_ID}-01`,
  `00-${TRACE_ID}-${SPAN_ID.slice(1)}-01`,
  `00-${TRACE_ID}-${SPAN_ID}-1`,
  'not a traceparent',
];

const CARRIERS: Record<string, unknown>[] = TRACEPARENTS.flatMap((traceparent) => [
  { traceparent },
  { traceparent, tracestate: 'vendor=abc,other=x1' },
  { traceparent, baggage: 'user=alice' },
  { traceparent: [traceparent, `00-${'1'.repeat(32)}-${'2'.repeat(16)}-01`] },
]);

const PROPAGATORS: [string, () => TextMapPropagator][] = [
  [
    'W3C trace context and baggage',
    () => new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  ],
  ['W3C trace context', () => new W3CTraceContextPropagator()],
];

describe.each(PROPAGATORS)('incomingContext with %s', (_name, make) => {
  afterEach(() => propagation.disable());

  it("gives the propagator's span context and baggage for every carrier", () => {
    propagation.setGlobalPropagator(make());
    for (const carrier of CARRIERS) {
      const expected = propagation.extract(ROOT_CONTEXT, carrier);
      const actual = incomingContext(carrier);
      const what = JSON.stringify(carrier);
      expect(trace.getSpanContext(actual), what).toEqual(trace.getSpanContext(expected));
      expect(propagation.getBaggage(actual)?.getAllEntries(), what).toEqual(
        propagation.getBaggage(expected)?.getAllEntries(),
      );
    }
  });
});

describe('plainTraceparent', () => {
  it('reads the one valid version-00 layout and leaves the rest to the propagator', () => {
    expect(plainTraceparent(`00-${TRACE_ID}-${SPAN_ID}-01`)).toEqual({
      traceId: TRACE_ID,
      spanId: SPAN_ID,
      traceFlags: 1,
      isRemote: true,
    });
    expect(plainTraceparent(`00-${TRACE_ID}-${SPAN_ID}-00`)?.traceFlags).toBe(0);
    for (const other of [TRACEPARENTS[4]!, TRACEPARENTS[7]!, TRACEPARENTS[10]!, TRACEPARENTS[13]!]) {
      expect(plainTraceparent(other)).toBeUndefined();
    }
  });
});
