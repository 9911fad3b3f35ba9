import { type Context, ROOT_CONTEXT, SpanKind, trace, TraceFlags } from '@opentelemetry/api';
import { type Sampler, SamplingDecision } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { AdaptiveSampler, createSampler, traceIdFraction } from '../../src/adapters/telemetry/samplers.js';
import { startTracing } from '../../src/adapters/telemetry/tracing.js';
import { loadConfig, type TracingConfig } from '../../src/config/config.js';

/** Deterministic pseudo-random trace ids (mulberry32), so every run sees the same ids. */
function traceIds(seed: number): () => string {
  let state = seed >>> 0;
  const next32 = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0).toString(16).padStart(8, '0');
  };
  return () => next32() + next32() + next32() + next32();
}

const sampled = (sampler: Sampler, traceId: string, context: Context = ROOT_CONTEXT) =>
  sampler.shouldSample(context, traceId, 'GET /:code', SpanKind.SERVER, {}, []).decision ===
  SamplingDecision.RECORD_AND_SAMPLED;

function tracingConfig(env: Record<string, string>): TracingConfig {
  return loadConfig(env).tracing;
}

function withParent(flags: TraceFlags): Context {
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    spanId: '00f067aa0ba902b7',
    traceFlags: flags,
    isRemote: true,
  });
}

/**
 * Feeds `perSecond` new traces a second, evenly spread, for `seconds` seconds of the fake clock;
 * returns how many were sampled in each second.
 */
function drive(
  sampler: AdaptiveSampler,
  clock: { ms: number },
  nextId: () => string,
  perSecond: number,
  seconds: number,
) {
  const perWindow: number[] = [];
  for (let s = 0; s < seconds; s++) {
    let kept = 0;
    for (let i = 0; i < perSecond; i++) {
      clock.ms += 1000 / perSecond;
      if (sampled(sampler, nextId())) kept++;
    }
    perWindow.push(kept);
  }
  return perWindow;
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

describe('adaptive sampler', () => {
  it('converges on the target under steady synthetic load, and again when the load changes', () => {
    const clock = { ms: 0 };
    const sampler = new AdaptiveSampler({ targetPerSecond: 10, now: () => clock.ms });
    const nextId = traceIds(1);

    const steady = drive(sampler, clock, nextId, 2000, 40);
    expect(steady[0]).toBeGreaterThan(1000); // before the first adjustment: everything
    expect(mean(steady.slice(-20))).toBeGreaterThan(8);
    expect(mean(steady.slice(-20))).toBeLessThan(12);
    expect(sampler.probability).toBeCloseTo(10 / 2000, 3);

    const surge = drive(sampler, clock, nextId, 8000, 40);
    expect(mean(surge.slice(-20))).toBeGreaterThan(8);
    expect(mean(surge.slice(-20))).toBeLessThan(12);
    expect(sampler.probability).toBeCloseTo(10 / 8000, 4);

    const quiet = drive(sampler, clock, nextId, 5, 10);
    expect(quiet.slice(-5)).toEqual([5, 5, 5, 5, 5]); // below the target: every trace
  });

  it('never exceeds the configured rate', () => {
    const clock = { ms: 0 };
    const sampler = new AdaptiveSampler({ targetPerSecond: 1000, maxProbability: 0.25, now: () => clock.ms });
    drive(sampler, clock, traceIds(2), 100, 5);
    expect(sampler.probability).toBe(0.25);
  });

  it('decides from the trace id alone: same history, same ids, same decisions', () => {
    const decisions = () => {
      const clock = { ms: 0 };
      const sampler = new AdaptiveSampler({ targetPerSecond: 5, now: () => clock.ms });
      const nextId = traceIds(3);
      drive(sampler, clock, nextId, 500, 5);
      return Array.from({ length: 500 }, () => {
        clock.ms += 1;
        return sampled(sampler, nextId());
      });
    };
    expect(decisions()).toEqual(decisions());
    // A trace id's place in [0, 1) is fixed: ids below the probability are kept.
    expect(traceIdFraction('ffffffffffffffffffffffffffffffff')).toBeCloseTo(1, 10);
    expect(traceIdFraction('00000000000000000000000000000001')).toBeCloseTo(0, 10);
  });
});

describe('the configured sampler', () => {
  const ids = traceIds(4);
  const manyIds = Array.from({ length: 10_000 }, ids);

  it('rate 1 keeps every new trace', () => {
    const sampler = createSampler(tracingConfig({ TRACING_SAMPLING_RATE: '1' }));
    expect(manyIds.every((id) => sampled(sampler, id))).toBe(true);
  });

  it('rate 0.1 keeps about a tenth, the same ones every time', () => {
    const sampler = createSampler(tracingConfig({ TRACING_SAMPLING_RATE: '0.1' }));
    const kept = manyIds.filter((id) => sampled(sampler, id));
    expect(kept.length).toBeGreaterThan(800);
    expect(kept.length).toBeLessThan(1200);
    expect(manyIds.filter((id) => sampled(sampler, id))).toEqual(kept);
  });

  it('rate 0 records nothing, not even under a sampled parent', () => {
    const sampler = createSampler(tracingConfig({ TRACING_SAMPLING_RATE: '0' }));
    expect(manyIds.some((id) => sampled(sampler, id))).toBe(false);
    expect(sampled(sampler, ids(), withParent(TraceFlags.SAMPLED))).toBe(false);
  });

  for (const kind of ['ratio', 'adaptive']) {
    it(`${kind}: follows the parent's decision`, () => {
      const sampler = createSampler(
        tracingConfig({
          TRACING_SAMPLER: kind,
          TRACING_SAMPLING_RATE: '0.000001',
          TRACING_TARGET_TRACES_PER_SECOND: '0.001',
        }),
      );
      const idsUnderParent = manyIds.slice(0, 100);
      expect(idsUnderParent.every((id) => sampled(sampler, id, withParent(TraceFlags.SAMPLED)))).toBe(true);
      expect(idsUnderParent.some((id) => sampled(sampler, id, withParent(TraceFlags.NONE)))).toBe(false);
    });
  }
});

describe('tracing configuration (spec §6.3)', () => {
  it('OTEL_SDK_DISABLED=true: tracing off whatever the rate and endpoint; nothing is installed', () => {
    const config = tracingConfig({
      OTEL_SDK_DISABLED: 'true',
      TRACING_SAMPLING_RATE: '1',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
    });
    expect(config.enabled).toBe(false);
    const tracing = startTracing(config);
    expect(tracing.enabled).toBe(false);
    const span = trace.getTracer('test').startSpan('anything');
    expect(span.isRecording()).toBe(false);
    span.end();
  });

  it('the rate defaults to 1 with an endpoint and to 0 (off) without one', () => {
    expect(tracingConfig({})).toMatchObject({ enabled: false, samplingRate: 0, otlpEndpoint: undefined });
    expect(tracingConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toMatchObject({
      enabled: true,
      samplingRate: 1,
      otlpEndpoint: 'http://127.0.0.1:4318',
    });
    expect(tracingConfig({ TRACING_SAMPLING_RATE: '0.1' })).toMatchObject({ enabled: true, samplingRate: 0.1 });
    expect(
      tracingConfig({ TRACING_SAMPLING_RATE: '0', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }),
    ).toMatchObject({
      enabled: false,
    });
    expect(() => loadConfig({ TRACING_SAMPLING_RATE: '1.5' })).toThrow(/TRACING_SAMPLING_RATE/);
    expect(() => loadConfig({ TRACING_SAMPLER: 'always' })).toThrow(/TRACING_SAMPLER/);
  });
});
