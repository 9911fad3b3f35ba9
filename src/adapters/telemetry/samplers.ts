import type { Context } from '@opentelemetry/api';
import {
  AlwaysOffSampler,
  ParentBasedSampler,
  type Sampler,
  SamplingDecision,
  type SamplingResult,
} from '@opentelemetry/sdk-trace-base';
import type { TracingConfig } from '../../config/config.js';

const NOT_RECORD: SamplingResult = Object.freeze({ decision: SamplingDecision.NOT_RECORD });
const SAMPLED: SamplingResult = Object.freeze({ decision: SamplingDecision.RECORD_AND_SAMPLED });

/** 2^52: the last 13 hex digits of a trace id (random per W3C trace context level 2) as a number in [0, 1). */
const RANDOM_SPACE = 2 ** 52;

/** Where the trace id's randomness lies, as a fraction in [0, 1): the same id always gives the same value. */
export function traceIdFraction(traceId: string): number {
  return Number.parseInt(traceId.slice(-13), 16) / RANDOM_SPACE;
}

/**
 * A root sampler whose decision on a new trace depends only on `traceIdFraction` of its id (and
 * its own state), so it can be asked with the fraction alone, before the id exists as a string
 * (see RootSampling).
 */
export interface FractionSampler extends Sampler {
  /** The decision on a new trace whose id has this `traceIdFraction`; counts it like `shouldSample`. */
  sampleFraction(fraction: number): boolean;
}

export function isFractionSampler(sampler: Sampler): sampler is FractionSampler {
  return typeof (sampler as Partial<FractionSampler>).sampleFraction === 'function';
}

/**
 * Keeps each new trace with probability `ratio`, decided from the random part of its trace id
 * (as the adaptive sampler does), so the same id always gets the same decision.
 */
export class RatioSampler implements FractionSampler {
  constructor(readonly ratio: number) {}

  shouldSample(_context: Context, traceId: string): SamplingResult {
    return this.sampleFraction(traceIdFraction(traceId)) ? SAMPLED : NOT_RECORD;
  }

  sampleFraction(fraction: number): boolean {
    return fraction < this.ratio;
  }

  toString(): string {
    return `RatioSampler{${this.ratio}}`;
  }
}

export interface AdaptiveSamplerOptions {
  /** New traces to keep per second, on average. */
  readonly targetPerSecond: number;
  /** Upper bound of the probability (the configured sampling rate). */
  readonly maxProbability?: number;
  /** How often the probability is re-computed. */
  readonly windowMs?: number;
  /** Milliseconds from a monotonic clock; tests drive it by hand. */
  readonly now?: () => number;
}

/**
 * Keeps about `targetPerSecond` new traces per second whatever the traffic: at the end of each
 * window it measures the rate of new traces (smoothed over windows) and sets the probability to
 * target / rate, at most `maxProbability`. The decision for one trace depends only on its id and the current probability,
 * so every service sharing the trace id and probability decides alike.
 *
 * @example
 *   new ParentBasedSampler({ root: new AdaptiveSampler({ targetPerSecond: 10 }) })
 */
export class AdaptiveSampler implements FractionSampler {
  private readonly target: number;
  private readonly max: number;
  private readonly windowMs: number;
  private readonly now: () => number;
  private windowStart: number;
  private seen = 0;
  private smoothedRate: number | undefined;
  private currentProbability: number;

  constructor(options: AdaptiveSamplerOptions) {
    this.target = options.targetPerSecond;
    this.max = options.maxProbability ?? 1;
    this.windowMs = options.windowMs ?? 1000;
    this.now = options.now ?? (() => performance.now());
    this.windowStart = this.now();
    // Until the first window closes nothing is known about the traffic: start at the ceiling.
    this.currentProbability = this.max;
  }

  /** The probability in force now. */
  get probability(): number {
    return this.currentProbability;
  }

  shouldSample(_context: Context, traceId: string): SamplingResult {
    return this.sampleFraction(traceIdFraction(traceId)) ? SAMPLED : NOT_RECORD;
  }

  sampleFraction(fraction: number): boolean {
    const now = this.now();
    if (now - this.windowStart >= this.windowMs) this.adjust(now);
    this.seen++;
    return fraction < this.currentProbability;
  }

  toString(): string {
    return `AdaptiveSampler{targetPerSecond=${this.target}, probability=${this.currentProbability}}`;
  }

  private adjust(now: number): void {
    const rate = (this.seen * 1000) / (now - this.windowStart);
    // Half the new window, half the history, so one noisy window does not swing it; a load that
    // more than doubled or halved is taken as it is, so a surge or a lull is followed at once.
    const previous = this.smoothedRate;
    this.smoothedRate =
      previous === undefined || rate > 2 * previous || rate < previous / 2 ? rate : (previous + rate) / 2;
    this.currentProbability =
      this.smoothedRate <= this.target ? this.max : Math.min(this.max, this.target / this.smoothedRate);
    this.windowStart = now;
    this.seen = 0;
  }
}

/**
 * The sampler the configuration asks for. Rate 0 records nothing, not even under a sampled
 * parent (spec §6.3); otherwise a sampled parent is followed and new traces are sampled by
 * ratio or adaptively.
 */
export function createSampler(config: TracingConfig, options: { now?: () => number } = {}): Sampler {
  return withParent(createRootSampler(config, options));
}

/** The sampler of new traces alone (no parent): what `createSampler` applies when there is no parent. */
export function createRootSampler(config: TracingConfig, options: { now?: () => number } = {}): Sampler {
  if (config.samplingRate <= 0) return new AlwaysOffSampler();
  return config.sampler === 'adaptive'
    ? new AdaptiveSampler({
        targetPerSecond: config.targetTracesPerSecond,
        maxProbability: config.samplingRate,
        now: options.now,
      })
    : new RatioSampler(config.samplingRate);
}

/** `root` for new traces, the parent's decision otherwise; nothing at all when `root` is always off (rate 0). */
export function withParent(root: Sampler): Sampler {
  return root instanceof AlwaysOffSampler ? root : new ParentBasedSampler({ root });
}
