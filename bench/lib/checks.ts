/**
 * The budgets of design.md §4, checked against a run's medians. Each check has a verdict:
 *
 * - GENERATOR-BOUND when the figure it is measured against (the baseline's, or the variant
 *   without the feature) reaches 85% of the generator's ceiling in the same scenario: the
 *   generator, not the target, may be what limits it, so the ratio says nothing;
 * - INVALID when either side had socket errors or wrong statuses, or answered a probe wrongly, or
 *   when the ceiling itself was disturbed in most rounds (`disturbedCeilingRounds`), or, for a
 *   ratio to the baseline, when the two baseline processes disagree (`baselineTwins`);
 * - otherwise PASS or FAIL.
 */
import type { ScenarioResult, TargetResult } from './scenarios.js';
import { integer, median } from './stats.js';
import type { ServiceVariant } from './variants.js';

export type Verdict = 'PASS' | 'FAIL' | 'GENERATOR-BOUND' | 'INVALID';

/** A reference figure at or above this fraction of the ceiling is generator-bound. */
export const GENERATOR_BOUND_FRACTION = 0.85;

/** Two baseline processes further apart than this (median of their round ratios) leave no yardstick. */
export const BASELINE_TWINS_TOLERANCE = 0.1;

export interface Check {
  readonly scenario: string;
  readonly target: string;
  /** What is compared, e.g. "rps / baseline rps". */
  readonly measure: string;
  readonly value: number;
  readonly op: '>=' | '<=';
  readonly limit: number;
  readonly verdict: Verdict;
  /** The lowest and highest value over the measured rounds (the value is their median). */
  readonly spread?: readonly [number, number];
  readonly note?: string;
}

interface BaselineBudget {
  readonly kind: ScenarioResult['kind'];
  readonly backends?: readonly string[];
  readonly measure: string;
  readonly value: (service: TargetResult, baseline: TargetResult) => number;
  readonly op: Check['op'];
  readonly limit: number;
}

const rpsRatio = (s: TargetResult, b: TargetResult) => s.rps / b.rps;

/** Budgets of the reference variant against the baseline of the same scenario. */
const BASELINE_BUDGETS: readonly BaselineBudget[] = [
  { kind: 'redirect', measure: 'rps / baseline rps', value: rpsRatio, op: '>=', limit: 0.9 },
  { kind: 'redirect', measure: 'p99 / baseline p99', value: (s, b) => s.p99Ms / b.p99Ms, op: '<=', limit: 1.2 },
  { kind: 'shorten', backends: ['sqlite'], measure: 'rps / baseline rps', value: rpsRatio, op: '>=', limit: 0.4 },
  { kind: 'shorten', backends: ['postgres'], measure: 'rps / baseline rps', value: rpsRatio, op: '>=', limit: 0.25 },
];

const find = (result: ScenarioResult, kind: TargetResult['kind']) => result.targets.find((t) => t.kind === kind);

function broken(target: TargetResult): string | undefined {
  if (target.problems.length > 0) return `${target.name}: ${target.problems[0]}`;
  if (target.unexpected > 0) return `${target.name}: ${target.unexpected} socket errors or wrong statuses`;
  return undefined;
}

const joinNotes = (...notes: (string | undefined)[]) => notes.filter(Boolean).join('; ') || undefined;

/**
 * The rounds in which the generator's ceiling measured below another target of the same round,
 * one line each. The ceiling server does the least a server can do per request, so a target that
 * does more cannot get more through the same generator in the same round: such a round measured
 * something else on the machine, not the generator. The ceiling's median outvotes one such round;
 * in most of the rounds, the scenario has no ceiling to judge by.
 */
export function disturbedCeilingRounds(result: ScenarioResult): string[] {
  const ceiling = find(result, 'ceiling');
  if (ceiling === undefined) return [];
  return ceiling.rounds.flatMap((round, i) => {
    const rpsOf = (t: TargetResult) => t.rounds[i]?.rps ?? 0;
    const fastest = result.targets.filter((t) => t !== ceiling).sort((a, b) => rpsOf(b) - rpsOf(a))[0];
    if (fastest === undefined || !(rpsOf(fastest) > round.rps)) return [];
    return [
      `round ${i + 1}: the ceiling ${integer(round.rps)} req/s, below ${fastest.name}'s ${integer(rpsOf(fastest))}`,
    ];
  });
}

/**
 * The verdict of `pass`, unless `sides` were broken, the ceiling was disturbed in most rounds, or
 * `reference` reached the ceiling. A ceiling disturbed in fewer rounds is noted beside the verdict.
 */
export function verdictOf(
  result: ScenarioResult,
  reference: TargetResult,
  sides: readonly TargetResult[],
  pass: boolean,
): { verdict: Verdict; note?: string } {
  const problem = sides.map(broken).find((p) => p !== undefined);
  if (problem !== undefined) return { verdict: 'INVALID', note: problem };
  const ceiling = find(result, 'ceiling');
  if (ceiling === undefined || !(ceiling.rps > 0)) return { verdict: 'INVALID', note: 'no generator ceiling measured' };
  const disturbed = disturbedCeilingRounds(result);
  const disturbedNote =
    disturbed.length === 0
      ? undefined
      : `ceiling disturbed in ${disturbed.length} of ${ceiling.rounds.length} rounds (${disturbed.join('; ')})`;
  if (disturbed.length * 2 > ceiling.rounds.length) return { verdict: 'INVALID', note: disturbedNote };
  const share = reference.rps / ceiling.rps;
  if (share >= GENERATOR_BOUND_FRACTION) {
    const note = `${reference.name} at ${(share * 100).toFixed(0)}% of the ceiling`;
    return { verdict: 'GENERATOR-BOUND', note: joinNotes(note, disturbedNote) };
  }
  return { verdict: pass ? 'PASS' : 'FAIL', ...(disturbedNote === undefined ? {} : { note: disturbedNote }) };
}

function passes(value: number, op: Check['op'], limit: number): boolean {
  return op === '>=' ? value >= limit : value <= limit;
}

/** A ratio over the measured rounds: each round's own ratio (both sides ran in that round). */
export interface RoundRatios {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly n: number;
}

/**
 * `a`'s figure over `b`'s, round by round (`a` and `b` were measured in the same round, a few
 * seconds apart, in rotating order): less sensitive than the ratio of medians to load that
 * changes between rounds, and its spread shows how far a single round can be trusted.
 */
export function roundRatios(
  a: TargetResult,
  b: TargetResult,
  figure: 'rps' | 'p99Ms' | 'cpu',
): RoundRatios | undefined {
  const of = (t: TargetResult, i: number) => (figure === 'cpu' ? t.cpuUsRounds?.[i] : t.rounds[i]?.[figure]);
  const n = Math.min(a.rounds.length, b.rounds.length);
  const ratios = Array.from({ length: n }, (_, i) => of(a, i)! / of(b, i)!).filter((r) => Number.isFinite(r));
  if (ratios.length === 0) return undefined;
  return { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios), n: ratios.length };
}

/** The value is a median of rounds: how many (their spread is the check's `spread`). */
const roundsText = (r: RoundRatios | undefined) => (r === undefined || r.n < 2 ? undefined : `median of ${r.n} rounds`);

/** CPU time per request of `a` against `b`, round by round: the figure least moved by a busy machine. */
function cpuNote(a: TargetResult, b: TargetResult): string | undefined {
  const r = roundRatios(a, b, 'cpu');
  return r === undefined ? undefined : `CPU/req ${r.median.toFixed(2)}x (${r.min.toFixed(2)}-${r.max.toFixed(2)})`;
}

/**
 * The second baseline process against the first, round by round. Both are the same server on the
 * same cores, so they should measure the same. A baseline process has run at 0.70 of its usual
 * req/s through a whole scenario while the services measured as usual: V8 had left
 * `process.nextTick`'s literal megamorphic in it (fixed: baseline-server.ts keeps the tick shapes
 * alive, as the service does; bench/PROFILE.md). Every ratio to such a baseline is wrong by as
 * much, and nothing else in a run shows it; the next such accident of one process shows here.
 * `agree` is false when their median ratio is more than `BASELINE_TWINS_TOLERANCE` from 1;
 * undefined without a second baseline.
 */
export function baselineTwins(result: ScenarioResult): { readonly agree: boolean; readonly text: string } | undefined {
  const [first, second] = result.targets.filter((t) => t.kind === 'baseline');
  if (first === undefined || second === undefined) return undefined;
  const rounds = roundRatios(second, first, 'rps');
  const ratio = rounds?.median ?? second.rps / first.rps;
  const agree = Math.abs(ratio - 1) <= BASELINE_TWINS_TOLERANCE;
  const spread = rounds === undefined || rounds.n < 2 ? '' : `, ${rounds.min.toFixed(2)}-${rounds.max.toFixed(2)}`;
  // Shown, never judged: how far apart two identical servers' p99s are is the p99 budget's own noise.
  const p99 = roundRatios(second, first, 'p99Ms')?.median ?? second.p99Ms / first.p99Ms;
  const text =
    `${second.name} = ${ratio.toFixed(2)} x ${first.name} req/s (${roundsText(rounds) ?? 'medians'}${spread}), ` +
    `p99 ${p99.toFixed(2)} x: ` +
    (agree
      ? 'the two baseline processes agree'
      : `the two baseline processes disagree by more than ${BASELINE_TWINS_TOLERANCE * 100}%, so no ratio to the baseline holds`);
  return { agree, text };
}

function baselineChecks(result: ScenarioResult): Check[] {
  const service = find(result, 'service');
  const baseline = find(result, 'baseline');
  if (result.group !== 'main' || service === undefined || baseline === undefined) return [];
  const twins = baselineTwins(result);
  return BASELINE_BUDGETS.filter(
    (budget) => budget.kind === result.kind && (budget.backends?.includes(result.backend) ?? true),
  ).map((budget) => {
    const figure = budget.measure.startsWith('p99') ? 'p99Ms' : 'rps';
    const rounds = roundRatios(service, baseline, figure);
    // The median of the rounds' own ratios when there are rounds, else the ratio of the medians.
    const value = rounds?.median ?? budget.value(service, baseline);
    const judged = verdictOf(result, baseline, [service, baseline], passes(value, budget.op, budget.limit));
    const { verdict, note } =
      twins?.agree === false && judged.verdict !== 'INVALID'
        ? { verdict: 'INVALID' as const, note: joinNotes(twins.text, judged.note) }
        : judged;
    return {
      scenario: result.id,
      target: service.name,
      measure: budget.measure,
      value,
      op: budget.op,
      limit: budget.limit,
      verdict,
      ...(rounds === undefined || rounds.n < 2 ? {} : { spread: [rounds.min, rounds.max] as const }),
      note: joinNotes(
        note,
        roundsText(rounds),
        `ratio of medians ${budget.value(service, baseline).toFixed(2)}`,
        figure === 'rps' ? cpuNote(service, baseline) : undefined,
      ),
    };
  });
}

/**
 * Each variant with a feature budget for this workload against the reference variant. The value
 * is the feature's cost, 1 − rps with the feature / rps without it.
 */
export function featureChecks(result: ScenarioResult, variants: readonly ServiceVariant[]): Check[] {
  const reference = find(result, 'service');
  if (result.group !== 'main' || reference === undefined) return [];
  return variants.flatMap((variant) => {
    const target = result.targets.find((t) => t.kind === 'service' && t.name === variant.name);
    const cost = variant.featureCost;
    const max = cost?.max[result.kind];
    if (cost === undefined || max === undefined || target === undefined || target === reference) return [];
    const [withFeature, without] = cost.feature === 'on' ? [target, reference] : [reference, target];
    const rounds = roundRatios(withFeature, without, 'rps');
    const value = 1 - (rounds?.median ?? withFeature.rps / without.rps);
    const { verdict, note } = verdictOf(result, without, [withFeature, without], value <= max);
    const detail = joinNotes(
      roundsText(rounds),
      `${withFeature.name} = ${(withFeature.rps / without.rps).toFixed(3)} x ${without.name} (medians)`,
      cpuNote(withFeature, without),
      `p99 ${withFeature.p99Ms.toFixed(2)} vs ${without.p99Ms.toFixed(2)} ms`,
    );
    return [
      {
        scenario: result.id,
        target: variant.name,
        measure: `${cost.label} cost`,
        value,
        op: '<=' as const,
        limit: max,
        verdict,
        ...(rounds === undefined || rounds.n < 2 ? {} : { spread: [1 - rounds.max, 1 - rounds.min] as const }),
        note: note === undefined ? detail : `${note}; ${detail}`,
      },
    ];
  });
}

export function evaluate(results: readonly ScenarioResult[], variants: readonly ServiceVariant[]): Check[] {
  return results.flatMap((result) => [...baselineChecks(result), ...featureChecks(result, variants)]);
}

/** The "1 against 2 serving processes" figures: informative, never a budget. */
export function workersInfo(result: ScenarioResult): string | undefined {
  if (result.group !== 'workers') return undefined;
  const [one, two] = result.targets.filter((t) => t.kind === 'service');
  if (one === undefined || two === undefined) return undefined;
  const { verdict, note } = verdictOf(result, two, [one, two], true);
  const bound = verdict === 'PASS' ? '' : ` [${verdict}${note ? `: ${note}` : ''}]`;
  return `${two.name} = ${(two.rps / one.rps).toFixed(2)} x ${one.name} req/s, p99 ${two.p99Ms.toFixed(2)} vs ${one.p99Ms.toFixed(2)} ms (informative)${bound}`;
}
