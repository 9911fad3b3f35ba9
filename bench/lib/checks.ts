/** The budgets of design.md §4, checked against a run's medians. */
import type { ScenarioResult, TargetResult } from './scenarios.js';
import type { ServiceVariant } from './variants.js';
import type { WorkloadName } from './workloads.js';

export interface Check {
  readonly scenario: string;
  readonly target: string;
  /** What is compared, e.g. "rps / baseline rps". */
  readonly measure: string;
  readonly value: number;
  readonly op: '>=' | '<=';
  readonly limit: number;
  readonly pass: boolean;
  readonly note?: string;
}

interface BaselineBudget {
  readonly workload: WorkloadName;
  readonly backends?: readonly string[];
  readonly measure: string;
  readonly value: (service: TargetResult, baseline: TargetResult) => number;
  readonly op: Check['op'];
  readonly limit: number;
}

/** Budgets of the reference variant against the baseline of the same scenario. */
const BASELINE_BUDGETS: readonly BaselineBudget[] = [
  { workload: 'redirect', measure: 'rps / baseline rps', value: (s, b) => s.rps / b.rps, op: '>=', limit: 0.8 },
  { workload: 'redirect', measure: 'p99 / baseline p99', value: (s, b) => s.p99Ms / b.p99Ms, op: '<=', limit: 1.5 },
  {
    workload: 'shorten',
    backends: ['sqlite'],
    measure: 'rps / baseline rps',
    value: (s, b) => s.rps / b.rps,
    op: '>=',
    limit: 0.3,
  },
];

/** 1,000,000 mappings: throughput at least this fraction of that at 1,000. */
const SCALING_LIMIT = 0.9;
const SMALL = 1_000;
const LARGE = 1_000_000;

function check(fields: Omit<Check, 'pass'>): Check {
  const pass = fields.op === '>=' ? fields.value >= fields.limit : fields.value <= fields.limit;
  return { ...fields, pass };
}

function baselineOf(result: ScenarioResult): TargetResult {
  return result.targets.find((t) => t.kind === 'baseline')!;
}

function referenceOf(result: ScenarioResult): TargetResult {
  return result.targets.find((t) => t.kind === 'service')!;
}

function baselineChecks(result: ScenarioResult): Check[] {
  const service = referenceOf(result);
  return BASELINE_BUDGETS.filter(
    (budget) => budget.workload === result.workload && (budget.backends?.includes(result.backend) ?? true),
  ).map((budget) =>
    check({
      scenario: result.id,
      target: service.name,
      measure: budget.measure,
      value: budget.value(service, baselineOf(result)),
      op: budget.op,
      limit: budget.limit,
    }),
  );
}

/** The 1m scenario against its 1k sibling (same backend and workload), when both ran. */
function scalingChecks(results: readonly ScenarioResult[]): Check[] {
  return results
    .filter((large) => large.mappings === LARGE)
    .flatMap((large) => {
      const small = results.find(
        (r) => r.mappings === SMALL && r.backend === large.backend && r.workload === large.workload,
      );
      if (small === undefined) return [];
      const normalised =
        referenceOf(large).rps / baselineOf(large).rps / (referenceOf(small).rps / baselineOf(small).rps);
      return [
        check({
          scenario: large.id,
          target: referenceOf(large).name,
          measure: `rps / rps at ${SMALL.toLocaleString('en-US')}`,
          value: referenceOf(large).rps / referenceOf(small).rps,
          op: '>=',
          limit: SCALING_LIMIT,
          note: `relative to the baseline in each: ${normalised.toFixed(2)}`,
        }),
      ];
    });
}

/**
 * Each variant with a feature budget against the reference variant, on the redirect path. The
 * value is the feature's cost, 1 − rps with the feature / rps without it; the note gives that
 * ratio itself and the floor it must reach (1 − budget).
 */
export function featureChecks(result: ScenarioResult, variants: readonly ServiceVariant[]): Check[] {
  if (result.workload !== 'redirect') return [];
  const reference = referenceOf(result);
  return variants.flatMap((variant) => {
    const target = result.targets.find((t) => t.kind === 'service' && t.name === variant.name);
    const cost = variant.featureCost;
    if (cost === undefined || target === undefined || target === reference) return [];
    const [withFeature, without] = cost.feature === 'on' ? [target, reference] : [reference, target];
    const ratio = withFeature.rps / without.rps;
    return [
      check({
        scenario: result.id,
        target: variant.name,
        measure: `${cost.label} cost: 1 - ${withFeature.name} rps / ${without.name} rps`,
        value: 1 - ratio,
        op: '<=',
        limit: cost.max,
        note: `${withFeature.name} = ${ratio.toFixed(3)} x ${without.name} (needs >= ${(1 - cost.max).toFixed(2)}); p99 ${withFeature.p99Ms.toFixed(1)} vs ${without.p99Ms.toFixed(1)} ms`,
      }),
    ];
  });
}

export function evaluate(results: readonly ScenarioResult[], variants: readonly ServiceVariant[]): Check[] {
  return [
    ...results.flatMap((result) => [...baselineChecks(result), ...featureChecks(result, variants)]),
    ...scalingChecks(results),
  ];
}
