import {
  type Attributes,
  type Context,
  type Link,
  ROOT_CONTEXT,
  SamplingDecision,
  type SamplingResult,
  type SpanContext,
  type SpanKind,
  TraceFlags,
} from '@opentelemetry/api';
// Types only: this module must not load the SDK (see below).
import type { IdGenerator, Sampler } from '@opentelemetry/sdk-trace-base';

/**
 * Head sampling of new traces before anything is made for them.
 *
 * The tracer decides only inside `startSpan`, after the span id, the trace id and the parent
 * context exist; an unsampled request then still costs a non-recording span, a context and a
 * context switch. For a request that starts a new trace (no incoming `traceparent`), the HTTP
 * layer asks `sampleNewTrace()` first: it draws the trace id and asks the configured sampler,
 * exactly as the tracer would. When the answer is "drop", nothing else happens. When it is
 * "record", the decision is primed: the very next root span started (synchronously, right after)
 * gets that trace id, and the sampler is not asked twice (the adaptive sampler counts what it is
 * asked). Which traces are kept is therefore the same as if the tracer had decided.
 *
 * Installed by `startTracing` (its `idGenerator` and `sampler` go into the tracer provider), and
 * found by the HTTP layer through `rootSampling()`: this module loads nothing of the SDK, so the
 * app can import it whether tracing is on or off.
 *
 * @example
 *   const roots = new RootSampling(createSampler(config));
 *   new NodeTracerProvider({ sampler: roots.sampler, idGenerator: roots.idGenerator, ... });
 *   if (roots.sampleNewTrace('GET /:code', SpanKind.SERVER)) span = tracer.startSpan('GET /:code', { kind }, ROOT_CONTEXT);
 */
export class RootSampling {
  /**
   * The decision made by `sampleNewTrace`, until the root span it was made for is started; with
   * the ratio samplers also that span's id, drawn with the trace id (the SDK asks for the span id
   * first, then the trace id).
   */
  private primed:
    | { readonly traceId: string; spanId: string | undefined; readonly result: SamplingResult; handedOut: boolean }
    | undefined;
  /** The last trace dropped: its random part (13 hex digits' worth) or its id. */
  private dropped: number | string | undefined;

  /**
   * @param delegate the provider's sampler (parent-based), which the tracer asks for every span
   * @param root what `delegate` applies to a trace without a parent: asked here directly
   */
  constructor(
    private readonly delegate: Sampler,
    private readonly root: Sampler,
  ) {}

  /**
   * Decides whether a new trace whose root span is `name` is recorded. True: the next root span
   * started gets the trace id and decision just drawn, so start it right away. False: the trace
   * is dropped, and nothing was made for it.
   *
   * The ratio and adaptive samplers decide from the random part of the trace id alone (its last
   * 13 hex digits as a fraction, see `traceIdFraction`), so they are asked with that fraction
   * first, and the id is written out only for a trace that is kept: same decisions as from the
   * whole id, and a dropped request allocates nothing.
   */
  sampleNewTrace(name: string, kind: SpanKind): boolean {
    const root = this.root as Sampler & { sampleFraction?: (fraction: number) => boolean };
    if (root.sampleFraction !== undefined) {
      // Math.random() has 52 random bits: an exact integer below 2^52, i.e. 13 hex digits.
      const random = Math.floor(Math.random() * RANDOM_SPACE);
      if (!root.sampleFraction(random / RANDOM_SPACE)) {
        this.dropped = random;
        return false;
      }
      // One draw for both ids: a hex string and a random fill fewer for the span kept.
      const ids = drawIds(random);
      this.primed = { traceId: ids.slice(0, 32), spanId: ids.slice(32), result: RECORD_AND_SAMPLED, handedOut: false };
      return true;
    }
    const traceId = generateTraceId();
    const result = this.root.shouldSample(ROOT_CONTEXT, traceId, name, kind, NO_ATTRIBUTES, NO_LINKS);
    if (result.decision === SamplingDecision.NOT_RECORD) {
      this.dropped = traceId;
      return false;
    }
    this.primed = { traceId, spanId: undefined, result, handedOut: false };
    return true;
  }

  /**
   * The span context of the trace `sampleNewTrace` just dropped, not sampled, with a new span
   * id: for a request whose descendants (events it publishes, calls it makes) must inherit the
   * "drop" instead of deciding afresh. Made only when asked for.
   */
  droppedSpanContext(): SpanContext {
    const dropped = this.dropped;
    if (typeof dropped === 'number') {
      const ids = drawIds(dropped);
      return { traceId: ids.slice(0, 32), spanId: ids.slice(32), traceFlags: TraceFlags.NONE };
    }
    return { traceId: dropped ?? generateTraceId(), spanId: generateSpanId(), traceFlags: TraceFlags.NONE };
  }

  /** For the tracer provider: ids as the SDK draws them, except a primed trace's ids, each handed out once. */
  readonly idGenerator: IdGenerator = {
    generateTraceId: () => {
      const primed = this.primed;
      if (primed === undefined || primed.handedOut) return generateTraceId();
      primed.handedOut = true;
      return primed.traceId;
    },
    generateSpanId: () => {
      const primed = this.primed;
      const spanId = primed?.spanId;
      if (primed === undefined || primed.handedOut || spanId === undefined) return generateSpanId();
      primed.spanId = undefined;
      return spanId;
    },
  };

  /** For the tracer provider: the configured sampler, except for the primed trace, already decided. */
  readonly sampler: Sampler = {
    shouldSample: (
      context: Context,
      traceId: string,
      spanName: string,
      spanKind: SpanKind,
      attributes: Attributes,
      links: Link[],
    ): SamplingResult => {
      const primed = this.primed;
      if (primed !== undefined && primed.handedOut && primed.traceId === traceId) {
        this.primed = undefined;
        return primed.result;
      }
      return this.delegate.shouldSample(context, traceId, spanName, spanKind, attributes, links);
    },
    toString: () => `RootSampling{${this.delegate.toString()}}`,
  };
}

/** 2^52: see `traceIdFraction` in samplers.ts (not imported: it would load the SDK). */
const RANDOM_SPACE = 2 ** 52;
const RECORD_AND_SAMPLED: SamplingResult = Object.freeze({ decision: SamplingDecision.RECORD_AND_SAMPLED });

/** Shared, frozen: the samplers only read them. */
const NO_ATTRIBUTES: Attributes = Object.freeze({});
const NO_LINKS: Link[] = Object.freeze([]) as unknown as Link[];

/** Where every id here is drawn: a trace id's 16 bytes, then a span id's 8. */
const IDS = Buffer.allocUnsafe(24);

/** Fills IDS[from, to) with random 32-bit words; whether any bit of them is set. */
function fillRandom(from: number, to: number): boolean {
  let any = 0;
  for (let i = from; i < to; i += 4) {
    const word = (Math.random() * 2 ** 32) >>> 0;
    any |= word;
    IDS.writeUInt32BE(word, i);
  }
  return any !== 0;
}

/**
 * A random trace id whose last 13 hex digits (52 bits) are `random` and a random span id after
 * it, as one hex string of 48 digits: one buffer filled and written out once. Built as two hex
 * strings, a padded number and a comparison with a string of zeros made each time, a dropped
 * request's ids cost about 2 us, a large part of what tracing adds to a dropped create
 * (bench/PROFILE.md). Never all zeros, as the SDK's ids.
 */
function drawIds(random: number): string {
  fillRandom(0, 16);
  // Bytes 0-8 and the high half of byte 9 stay random; the rest of the trace id is `random`.
  IDS[9] = (IDS[9]! & 0xf0) | Math.floor(random / 2 ** 48);
  IDS.writeUIntBE(random % 2 ** 48, 10, 6);
  if (random === 0 && (IDS.readUInt32BE(0) | IDS.readUInt32BE(4) | IDS[8]! | IDS[9]!) === 0) IDS[15] = 1;
  if (!fillRandom(16, 24)) IDS[23] = 1;
  return IDS.toString('hex', 0, 24);
}

/** Random ids as the SDK's RandomIdGenerator draws them (lower-case hex, never all zero). */
function randomId(bytes: 8 | 16): string {
  if (!fillRandom(0, bytes)) IDS[bytes - 1] = 1;
  return IDS.toString('hex', 0, bytes);
}

function generateTraceId(): string {
  return randomId(16);
}

function generateSpanId(): string {
  return randomId(8);
}

let installed: RootSampling | undefined;

/** Makes `roots` the process's root sampling (tracing started); undefined uninstalls it. */
export function installRootSampling(roots: RootSampling | undefined): void {
  installed = roots;
}

/** The root sampling of the tracing started in this process, if any. */
export function rootSampling(): RootSampling | undefined {
  return installed;
}
