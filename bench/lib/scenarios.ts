/**
 * A scenario is one workload at one table size on one backend. Scenarios that share a backend
 * and a size form a group: its targets (ceiling server, baseline, service variants) are started
 * once and driven through each of its scenarios in turn. For each scenario every target is
 * probed, warmed up (with exact status counts), then measured in rounds whose target order rotates
 * (`rotated`); after each
 * run the bench waits until every target is idle again, so one's leftover work never lands in
 * another's measurement. The median of each figure is kept.
 */
import { loadavg } from 'node:os';
import { type CacheLookups, missRatio, readCacheLookups, UNIFORM_MIN_MISS_RATIO } from './cache-lookups.js';
import { shortenTag } from './codes.js';
import type { DatabaseProcesses } from './database-cores.js';
import type { BackendName, Dataset, TargetData } from './datasets.js';
import {
  type ChildServer,
  cpuSeconds,
  settle,
  type StoppableTarget,
  stopBetweenRuns,
  type StoppedBetweenRuns,
} from './processes.js';
import { type BenchSettings, DATASET_SIZES, type DatasetSize } from './settings.js';
import { median } from './stats.js';
import type { Target, TargetKind, TargetSpec } from './targets.js';
import { type Measurement, runWrk } from './wrk.js';
import { type RunContext, sampleProblems, type Stored, type Workload, WORKLOADS } from './workloads.js';

export type GroupKind = 'main' | 'workers';

export interface Scenario {
  /** `<backend>-<redirect-popular|redirect-uniform|shorten>-<size>`, or `sqlite-workers-...`. */
  readonly id: string;
  readonly group: GroupKind;
  readonly backend: BackendName;
  readonly workload: Workload;
  readonly size: DatasetSize;
}

export interface TargetResult {
  readonly name: string;
  readonly kind: TargetKind;
  readonly pid: number;
  readonly warmup: Measurement | undefined;
  readonly rounds: readonly Measurement[];
  /** Medians over the rounds. */
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /**
   * CPU time the target's processes spent per request (median over the rounds), in µs: its own
   * work, much less sensitive to what else runs on the machine than its requests/s.
   */
  readonly cpuUsPerRequest: number;
  /** The same figure of each measured round, in round order (paired with the other targets' rounds). */
  readonly cpuUsRounds?: readonly number[];
  /**
   * PostgreSQL on this machine: the database's CPU time per request during the target's runs and
   * their settling (median over the rounds), in µs, beside the target's own (`cpuUsPerRequest`).
   */
  readonly databaseCpuUsPerRequest?: number;
  /** Socket errors and wrong statuses, summed over warm-up and rounds. */
  readonly unexpected: number;
  /** Exact statuses of the warm-up. */
  readonly statuses: Readonly<Record<string, number>>;
  readonly problems: readonly string[];
  /** Redirects, services: the share of the measured rounds' cache lookups that missed. */
  readonly cacheMissRatio?: number;
  /** Resident memory (process tree) after the scenario. */
  readonly rssBytes: number | undefined;
  /** Shorten, services: 2xx answers over all runs, and rows with the target's codes afterwards. */
  readonly created?: { readonly acknowledged: number; readonly stored: number; readonly inFlightMax: number };
  readonly outputLines: number;
  readonly outputTail: readonly string[];
}

export interface ScenarioResult {
  readonly id: string;
  readonly group: GroupKind;
  readonly backend: BackendName;
  readonly workload: Workload['name'];
  readonly kind: Workload['kind'];
  readonly mappings: number;
  readonly description: string;
  readonly connections: number;
  readonly ceilingServer: string;
  /** The ceiling first, then the baseline (main groups), then the services. */
  readonly targets: TargetResult[];
}

function scenarioId(backend: BackendName, group: GroupKind, workload: Workload, size: DatasetSize): string {
  const mix = workload.kind === 'redirect' ? `redirect-${workload.name}` : workload.name;
  return [backend, ...(group === 'workers' ? ['workers'] : []), mix, size.label].join('-');
}

/** Every scenario for these backends, in run order: by backend, then size, then workload. */
export function allScenarios(backends: readonly BackendName[]): Scenario[] {
  const main = backends.flatMap((backend) =>
    DATASET_SIZES.flatMap((size) =>
      WORKLOADS.map((workload) => ({
        id: scenarioId(backend, 'main', workload, size),
        group: 'main' as const,
        backend,
        workload,
        size,
      })),
    ),
  );
  const [size, workload] = [DATASET_SIZES[0], WORKLOADS[0]!];
  const workers = backends.includes('sqlite')
    ? [
        {
          id: scenarioId('sqlite', 'workers', workload, size),
          group: 'workers' as const,
          backend: 'sqlite' as const,
          workload,
          size,
        },
      ]
    : [];
  return [...main, ...workers];
}

/**
 * The scenarios that match any filter; a filter matches when each of its dash-separated parts
 * is a part of the scenario id ("redirect", "uniform", "sqlite-10m", "postgres-shorten-1k").
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

interface Driven {
  readonly target: Target;
  problems: string[];
  warmup?: Measurement;
  readonly rounds: Measurement[];
  readonly cpuUs: number[];
  readonly databaseCpuUs: number[];
  acknowledged: number;
  runs: number;
  /** Redirect-cache counts before the first measured round and after the last. */
  cache?: [CacheLookups | undefined, CacheLookups | undefined];
}

/** Responses that were not errors: every one a 2xx/3xx (counted exactly in warm-ups). */
function acknowledged(m: Measurement, expectedStatus: number): number {
  return Object.keys(m.statuses).length > 0 ? (m.statuses[String(expectedStatus)] ?? 0) : m.requests - m.errors.status;
}

async function load(
  driven: Driven,
  scenario: Scenario,
  stored: Stored,
  settings: BenchSettings,
  run: { round: number; durationS: number; countStatuses: boolean },
): Promise<Measurement> {
  const { workload } = scenario;
  const context: RunContext = { round: run.round, tag: shortenTag(driven.target.spec.letter ?? 'Z') };
  const m = await runWrk({
    url: driven.target.server.baseUrl,
    script: workload.script,
    args: workload.args(stored, context),
    durationS: run.durationS,
    connections: settings.connections,
    cores: settings.generatorCores,
    countStatuses: run.countStatuses,
    expectedStatus: workload.expectedStatus,
  });
  driven.acknowledged += acknowledged(m, workload.expectedStatus);
  driven.runs++;
  driven.problems.push(...sampleProblems(m.sample));
  return m;
}

/** The service's last visits of a run are written within a click flush interval (500 ms). */
const LAST_FLUSH_MS = 700;
/** Its fold runs every 5 s (src/composition/visits.ts): the wait for it is bounded a little above that. */
const FOLD_WAIT_MS = 8_000;

/**
 * After a service's redirect run: waits until the visits it recorded are folded into the day
 * rows (none of its segments left unfolded), at most `maxMs`. A service folds every 5 s:
 * settling alone saw it idle between its last flush and its next fold, so the fold (the largest
 * part of what a visit costs over many links) ran in the next target's run, slowing that target
 * and charged to nobody. Returns how long it waited, in ms.
 */
export async function visitsFolded(data: TargetData | undefined, maxMs = FOLD_WAIT_MS): Promise<number> {
  if (data === undefined) return 0;
  const started = performance.now();
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  await pause(LAST_FLUSH_MS);
  while ((await data.unfoldedVisits()) > 0 && performance.now() - started < maxMs) await pause(200);
  return performance.now() - started;
}

/** A measured run and what it cost: the target's CPU a request, and the database's where counted. */
export interface MeasuredRun {
  readonly m: Measurement;
  readonly cpuUs: number;
  readonly databaseCpuUs: number | undefined;
  /** How long the run's aftermath was waited for (the fold, then every process idle), in s. */
  readonly idleS: number;
}

/**
 * One measured run of a target, then its aftermath waited for (after a redirect run its visits
 * folded, then every process of `pids` idle): what the target does after its load (the last
 * flushes, the fold, consumers catching up) is its own, not the next target's, and counts in its
 * CPU time a request, as the database's work meanwhile counts in the database's; so does the
 * VACUUM of its dead rows where the database runs without autovacuum (`TargetData.vacuum`).
 */
export async function measuredRun(
  run: () => Promise<Measurement>,
  target: { readonly pid: number; readonly data: TargetData | undefined },
  after: {
    readonly redirect: boolean;
    readonly pids: readonly number[];
    readonly database: DatabaseProcesses | undefined;
  },
): Promise<MeasuredRun> {
  const { database } = after;
  const cpuBefore = cpuSeconds(target.pid);
  const databaseBefore = database?.cpuSeconds();
  const m = await run();
  const foldedMs = after.redirect ? await visitsFolded(target.data) : 0;
  // What autovacuum would do for this run's dead rows, where it is off: charged to this run's database CPU.
  const vacuumStarted = performance.now();
  await target.data?.vacuum();
  const vacuumMs = performance.now() - vacuumStarted;
  const idleS = (foldedMs + vacuumMs + (await settle(after.pids))) / 1000;
  const perRequest = (seconds: number) => (seconds * 1e6) / Math.max(1, m.requests);
  return {
    m,
    cpuUs: perRequest(cpuSeconds(target.pid) - cpuBefore),
    databaseCpuUs: databaseBefore === undefined ? undefined : perRequest(database!.cpuSeconds() - databaseBefore),
    idleS,
  };
}

async function drive(
  scenario: Scenario,
  all: readonly Driven[],
  stored: Stored,
  settings: BenchSettings,
  database: DatabaseProcesses | undefined,
): Promise<void> {
  // The database too must be done with one target's work before the next target runs.
  const pids = [...all.map((d) => d.target.server.pid), ...(database ? [database.pid] : [])];
  for (const d of all) {
    if (d.target.spec.kind !== 'ceiling')
      d.problems.push(...(await scenario.workload.probe(d.target.server.baseUrl, stored)));
  }
  for (const d of all) {
    d.warmup = await load(d, scenario, stored, settings, {
      round: 0,
      durationS: settings.warmupS,
      countStatuses: true,
    });
    await d.target.data?.vacuum(); // the warm-up's dead rows are no measured run's
    await settle(pids);
  }
  const cacheCounts = () =>
    Promise.all(
      all.map((d) => (d.target.spec.kind === 'service' ? readCacheLookups(d.target.server.baseUrl) : undefined)),
    );
  const before = await cacheCounts();
  // Only the target measured runs (`stopBetweenRuns`); all of them again before they are read.
  const stopped = await stopBetweenRuns(all.map((d) => stoppable(d.target.server, d.target.data)));
  try {
    await measureRounds(scenario, all, stored, settings, { pids, database, stopped });
  } finally {
    await stopped.release();
  }
  for (const warning of stopped.warnings) console.warn(`  ${warning}`);
  const after = await cacheCounts();
  all.forEach((d, i) => (d.cache = [before[i], after[i]]));
}

/** A target as `stopBetweenRuns` takes it: stopped only between its database transactions. */
export function stoppable(server: ChildServer, data: TargetData | undefined): StoppableTarget {
  return data === undefined
    ? { pid: server.pid }
    : { pid: server.pid, openTransactions: () => data.openTransactions(server.applicationName) };
}

async function measureRounds(
  scenario: Scenario,
  all: readonly Driven[],
  stored: Stored,
  settings: BenchSettings,
  context: {
    readonly pids: readonly number[];
    readonly database: DatabaseProcesses | undefined;
    readonly stopped: StoppedBetweenRuns;
  },
): Promise<void> {
  const { pids, database, stopped } = context;
  for (let round = 1; round <= settings.rounds; round++) {
    process.stdout.write(`  round ${round}/${settings.rounds}:`);
    for (const d of rotated(all, round - 1)) {
      const { m, cpuUs, databaseCpuUs, idleS } = await stopped.during(d.target.server.pid, () =>
        measuredRun(
          () => load(d, scenario, stored, settings, { round, durationS: settings.durationS, countStatuses: false }),
          { pid: d.target.server.pid, data: d.target.data },
          { redirect: scenario.workload.kind === 'redirect', pids, database },
        ),
      );
      d.rounds.push(m);
      d.cpuUs.push(cpuUs);
      if (databaseCpuUs !== undefined) d.databaseCpuUs.push(databaseCpuUs);
      const flag = m.unexpected > 0 ? ` (${m.unexpected} unexpected)` : '';
      const dbText = databaseCpuUs === undefined ? '' : `db ${databaseCpuUs.toFixed(1)} us/req, `;
      process.stdout.write(` ${d.target.spec.name} ${Math.round(m.rps)}${flag} (${dbText}idle ${idleS.toFixed(1)} s);`);
    }
    process.stdout.write(` load ${loadavg()[0]!.toFixed(2)}\n`);
  }
}

/**
 * The targets in the order of round `shift`: A B C, then B C A, then C A B, ... so that no target
 * always runs right after the same other one, or always first or last in a round (the machine's
 * load and a previous target's leftover work land on every target alike over the rounds).
 */
export function rotated<T>(items: readonly T[], shift: number): T[] {
  const n = items.length;
  if (n === 0) return [];
  const k = ((shift % n) + n) % n;
  return [...items.slice(k), ...items.slice(0, k)];
}

/** A uniform mix over more codes than the cache holds that still hits it measures the cache, not the database. */
function cacheProblems(scenario: Scenario, ratio: number | undefined): string[] {
  const large = scenario.workload.name === 'uniform' && scenario.size.mappings >= 1_000_000;
  if (!large || ratio === undefined || ratio >= UNIFORM_MIN_MISS_RATIO) return [];
  return [`only ${(ratio * 100).toFixed(1)}% of its cache lookups missed: the uniform mix is not measuring misses`];
}

async function summarise(d: Driven, scenario: Scenario, settings: BenchSettings): Promise<TargetResult> {
  const { server, spec, data } = d.target;
  const all = d.warmup === undefined ? d.rounds : [d.warmup, ...d.rounds];
  const created =
    scenario.workload.kind === 'shorten' && spec.kind === 'service' && data !== undefined
      ? {
          acknowledged: d.acknowledged,
          stored: await data.countCreated(`1${spec.letter}`),
          inFlightMax: d.runs * settings.connections,
        }
      : undefined;
  const cacheMissRatio = scenario.workload.kind === 'redirect' ? missRatio(d.cache?.[0], d.cache?.[1]) : undefined;
  d.problems.push(...cacheProblems(scenario, cacheMissRatio));
  return {
    name: spec.name,
    kind: spec.kind,
    pid: server.pid,
    warmup: d.warmup,
    rounds: d.rounds,
    rps: median(d.rounds.map((m) => m.rps)),
    p50Ms: median(d.rounds.map((m) => m.p50Ms)),
    p99Ms: median(d.rounds.map((m) => m.p99Ms)),
    cpuUsPerRequest: median(d.cpuUs),
    cpuUsRounds: [...d.cpuUs],
    ...(d.databaseCpuUs.length > 0 ? { databaseCpuUsPerRequest: median(d.databaseCpuUs) } : {}),
    unexpected: all.reduce((sum, m) => sum + m.unexpected, 0),
    statuses: d.warmup?.statuses ?? {},
    problems: [...new Set(d.problems)],
    rssBytes: server.rssBytes(),
    ...(cacheMissRatio === undefined ? {} : { cacheMissRatio }),
    created,
    outputLines: server.output.lines,
    outputTail: [...server.output.tail],
  };
}

/** Runs one scenario against the already started `targets` of its group. */
export async function runScenario(
  scenario: Scenario,
  dataset: Dataset,
  targets: readonly Target[],
  settings: BenchSettings,
  dir: string,
  database?: DatabaseProcesses,
): Promise<ScenarioResult> {
  const stored: Stored = { mappings: dataset.size.mappings, popular: settings.popularCodes, dir };
  const description = scenario.workload.describe(stored);
  process.stdout.write(`\n== ${scenario.id}: ${description}\n`);
  const all: Driven[] = targets.map((target) => ({
    target,
    problems: [],
    rounds: [],
    cpuUs: [],
    databaseCpuUs: [],
    acknowledged: 0,
    runs: 0,
  }));
  await drive(scenario, all, stored, settings, database);
  const results: TargetResult[] = [];
  for (const d of all) results.push(await summarise(d, scenario, settings));
  return {
    id: scenario.id,
    group: scenario.group,
    backend: scenario.backend,
    workload: scenario.workload.name,
    kind: scenario.workload.kind,
    mappings: dataset.size.mappings,
    description,
    connections: settings.connections,
    ceilingServer: targets.find((t) => t.spec.kind === 'ceiling')?.ceilingKind ?? 'none',
    targets: results,
  };
}

export type { TargetSpec };
