/**
 * A scenario is one workload at one table size on one backend. Running it starts the baseline
 * and every service variant, checks each answers correctly, warms each up, then measures them
 * in alternating rounds and keeps the median of each figure.
 */
import { loadavg } from 'node:os';
import type { BackendName, Dataset, IsolatedCopy } from './datasets.js';
import { type ChildServer, settle, startServer } from './processes.js';
import { type BenchSettings, DATASET_SIZES, type DatasetSize } from './settings.js';
import { median } from './stats.js';
import { SERVICE_ENV, type ServiceVariant } from './variants.js';
import { type Measurement, measure, type Stored, type Workload, WORKLOADS } from './workloads.js';

export interface Scenario {
  /** `<backend>-<workload>-<size>`, e.g. `sqlite-redirect-1m`. */
  readonly id: string;
  readonly backend: BackendName;
  readonly workload: Workload;
  readonly size: DatasetSize;
}

export interface TargetResult {
  readonly name: string;
  readonly kind: 'baseline' | 'service';
  readonly pid: number;
  readonly rounds: readonly Measurement[];
  /** Medians over the rounds. */
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Summed over warm-up and rounds. */
  readonly unexpected: number;
  readonly statuses: Readonly<Record<string, number>>;
  readonly probeProblems: readonly string[];
  /** VmRSS after the scenario. */
  readonly rssBytes: number | undefined;
  /** What the process wrote to stdout/stderr (the service logs at `warn`). */
  readonly outputLines: number;
  readonly outputTail: readonly string[];
}

export interface ScenarioResult {
  readonly id: string;
  readonly backend: BackendName;
  readonly workload: Workload['name'];
  readonly mappings: number;
  readonly description: string;
  readonly connections: number;
  readonly rowsBefore: number;
  readonly rowsAfter: number;
  /** The baseline first, then the variants in order. */
  readonly targets: readonly TargetResult[];
}

interface Target {
  readonly kind: TargetResult['kind'];
  readonly server: ChildServer;
  /** The service's own copy of the data, when the backend makes one (see Dataset.isolate). */
  readonly copy?: IsolatedCopy;
  probeProblems: string[];
  warmup?: Measurement;
  readonly rounds: Measurement[];
}

const BASELINE_ARGS = ['--import', 'tsx', 'bench/baseline-server.ts'];
/**
 * As `npm start` runs it (keep the two alike): the instrumentation module loads nothing while
 * tracing is off, and the young generation is larger than V8's default.
 */
const SERVICE_ARGS = ['--max-semi-space-size=32', '--import', './dist/instrumentation.js', 'dist/cli.js', 'serve'];

/** Every scenario for these backends, in run order: by backend, then size, then workload. */
export function allScenarios(backends: readonly BackendName[]): Scenario[] {
  return backends.flatMap((backend) =>
    DATASET_SIZES.flatMap((size) =>
      WORKLOADS.map((workload) => ({ id: `${backend}-${workload.name}-${size.label}`, backend, workload, size })),
    ),
  );
}

/**
 * The scenarios that match any filter; a filter matches when each of its dash-separated parts
 * is a part of the scenario id ("redirect", "sqlite-1m", "postgres-shorten-1k").
 */
export function selectScenarios(scenarios: readonly Scenario[], filters: readonly string[]): Scenario[] {
  if (filters.length === 0) return [...scenarios];
  const matches = (scenario: Scenario, filter: string) => {
    const parts = scenario.id.split('-');
    return filter.split('-').every((part) => parts.includes(part));
  };
  const unmatched = filters.filter((filter) => !scenarios.some((s) => matches(s, filter)));
  if (unmatched.length > 0) {
    throw new Error(
      `BENCH_SCENARIOS: ${unmatched.join(', ')} match no scenario of: ${scenarios.map((s) => s.id).join(', ')}`,
    );
  }
  return scenarios.filter((scenario) => filters.some((filter) => matches(scenario, filter)));
}

async function startTargets(dataset: Dataset, variants: readonly ServiceVariant[], started: Target[]): Promise<void> {
  const baseline = await startServer('baseline', [...BASELINE_ARGS, '--mappings', String(dataset.size.mappings)], {});
  started.push({ kind: 'baseline', server: baseline, probeProblems: [], rounds: [] });
  for (const variant of variants) {
    const copy = dataset.isolate?.(variant.name);
    const env = { ...SERVICE_ENV, DATABASE_URL: copy?.databaseUrl ?? dataset.databaseUrl, ...variant.env };
    try {
      const server = await startServer(variant.name, SERVICE_ARGS, env);
      started.push({ kind: 'service', server, copy, probeProblems: [], rounds: [] });
    } catch (error) {
      await copy?.drop();
      throw error;
    }
  }
}

function sumStatuses(measurements: readonly Measurement[]): Record<string, number> {
  const total: Record<string, number> = {};
  for (const m of measurements) {
    for (const [status, count] of Object.entries(m.statuses)) total[status] = (total[status] ?? 0) + count;
  }
  return total;
}

function summarise(target: Target): TargetResult {
  const { server, rounds } = target;
  const all = target.warmup === undefined ? rounds : [target.warmup, ...rounds];
  return {
    name: server.name,
    kind: target.kind,
    pid: server.pid,
    rounds,
    rps: median(rounds.map((m) => m.rps)),
    p50Ms: median(rounds.map((m) => m.p50Ms)),
    p99Ms: median(rounds.map((m) => m.p99Ms)),
    unexpected: all.reduce((sum, m) => sum + m.unexpected, 0),
    statuses: sumStatuses(all),
    probeProblems: target.probeProblems,
    rssBytes: server.rssBytes(),
    outputLines: server.output.lines,
    outputTail: [...server.output.tail],
  };
}

function storedBy(scenario: Scenario, settings: BenchSettings): Stored {
  return { mappings: scenario.size.mappings, popular: settings.popularCodes };
}

async function drive(scenario: Scenario, targets: readonly Target[], settings: BenchSettings): Promise<void> {
  const { workload } = scenario;
  const stored = storedBy(scenario, settings);
  const load = (target: Target, durationS: number) =>
    measure(workload, target.server.baseUrl, stored, { durationS, connections: settings.connections });
  for (const target of targets) target.probeProblems = await workload.probe(target.server.baseUrl, stored);
  for (const target of targets) {
    target.warmup = await load(target, settings.warmupS);
    await settle(target.server.pid);
  }
  for (let round = 1; round <= settings.rounds; round++) {
    process.stdout.write(`  round ${round}/${settings.rounds}:`);
    for (const target of targets) {
      const m = await load(target, settings.durationS);
      target.rounds.push(m);
      // Its work after the load (last flush, consumers catching up) is its own, not the next target's.
      const settledS = (await settle(target.server.pid)) / 1000;
      process.stdout.write(` ${target.server.name} ${Math.round(m.rps)} req/s (idle after ${settledS.toFixed(2)} s);`);
    }
    process.stdout.write(` load ${loadavg()[0]!.toFixed(2)}\n`);
  }
}

export async function runScenario(
  scenario: Scenario,
  dataset: Dataset,
  variants: readonly ServiceVariant[],
  settings: BenchSettings,
): Promise<ScenarioResult> {
  const description = scenario.workload.describe(storedBy(scenario, settings));
  process.stdout.write(`\n== ${scenario.id}: ${description}\n`);
  const rowsBefore = await dataset.countRows();
  const targets: Target[] = [];
  let results: TargetResult[];
  let rowsAfter: number;
  try {
    await startTargets(dataset, variants, targets);
    await drive(scenario, targets, settings);
    results = targets.map(summarise);
  } finally {
    for (const target of [...targets].reverse()) await target.server.stop();
  }
  try {
    // With a copy per service: the reference variant's (the others' differ only by what they were sent).
    const reference = targets.find((t) => t.kind === 'service');
    rowsAfter = await (reference?.copy ?? dataset).countRows();
  } finally {
    for (const target of targets) await target.copy?.drop();
  }
  return {
    id: scenario.id,
    backend: scenario.backend,
    workload: scenario.workload.name,
    mappings: scenario.size.mappings,
    description,
    connections: settings.connections,
    rowsBefore,
    rowsAfter,
    targets: results,
  };
}
