/**
 * `node --import tsx bench/ab.ts`: a quick A/B of service variants on one workload, without the
 * baseline, for investigating a budget. Each variant runs as its own process on its own copy of
 * one loaded dataset (SQLite, or PostgreSQL with AB_BACKEND=postgres), pinned like the bench's
 * targets (BENCH_GENERATOR_CORES, BENCH_TARGET_CORES); wrk drives them in rounds whose order
 * rotates (as the bench's) and the median of the rounds is printed. After each run every target is
 * let settle (as in the bench), a service's visits folded first: what a target does after its load
 * (the last flushes, the visit fold) counts in its CPU a request and does not land in the next
 * target's run.
 * Optionally one variant runs under `node --cpu-prof`.
 *
 *   AB_VARIANTS    comma-separated names from SERVICE_VARIANTS (default: all of them), and
 *                  `baseline`: the bare node:http baseline as one more target (only when named),
 *                  e.g. AB_VARIANTS=baseline,default AB_PROFILE=baseline,default to compare the
 *                  two processes' profiles under the same load; with it the generator's ceiling
 *                  (bench/lib/ceiling.ts: nginx, or its node:net stand-in) runs as the last target
 *                  of every round, as in the bench, and the baseline's share of it is printed,
 *                  GENERATOR-BOUND from 85 %: a ratio to the baseline means nothing past that
 *   AB_WORKLOAD    popular (default; "redirect" too), uniform or shorten
 *   AB_MAPPINGS    1000 (default) or 10000000: a dataset of bench/.data
 *   AB_BACKEND     sqlite (default) or postgres: the bench's PostgreSQL (DATABASE_URL, or the test
 *                  database), a schema of its own per variant at 1,000 mappings (bench/lib/datasets.ts);
 *                  its processes pinned to the target cores, as the bench does, and their CPU a request
 *                  printed as `db` (bench/lib/database-cores.ts)
 *   AB_ROUNDS      rounds (default 5), AB_DURATION_S seconds each (default 5), after a 2 s warm-up
 *   AB_KEEP_RUNNING  true: every target left running during the rounds (the bench and this
 *                  stop all but the one measured: `stopBetweenRuns`), to see what the stops change
 *   AB_TOGETHER    true: in each round every target is loaded at the same time, each by a wrk of
 *                  its own on the generator cores, all of them sharing the target cores; what
 *                  the machine does meanwhile (another tenant, the clock, thermal limits) then
 *                  falls on both sides of every ratio alike. Compare CPU a request (each
 *                  process's own, read from /proc), not req/s: the scheduler, not the target,
 *                  decides each one's share of the core (see PROFILE.md, "Targets loaded together")
 *   AB_PROFILE     variant names: those processes write a .cpuprofile into AB_PROFILE_DIR (default /tmp/ab-prof)
 *   AB_ENV_<NAME>  extra variant: AB_ENV_x='TRACING_SAMPLING_RATE=0.1,FOO=bar' adds variant x; the
 *                  pseudo-variable AB_DIST=<dir> runs that build instead of ./dist (A/B of builds),
 *                  and AB_FLAGS='--flag=value ...' adds node options (A/B of runtime flags), after the
 *                  target's own (package.json's `start`), so that one given again overrides it;
 *                  AB_BASELINE=true runs the baseline with the variant's environment instead of the
 *                  service (e.g. AB_ENV_headers='AB_BASELINE=true,BASELINE_RATE_LIMIT_HEADERS=true')
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCeiling } from './lib/ceiling.js';
import { GENERATOR_BOUND_FRACTION } from './lib/checks.js';
import { cleanUpAll, cleanUpOnSignals, registerCleanup } from './lib/cleanup.js';
import { shortenTag } from './lib/codes.js';
import { pinDatabase } from './lib/database-cores.js';
import { autovacuumNote, postgresBackend, sqliteBackend, type TargetData } from './lib/datasets.js';
import {
  type ChildServer,
  node,
  settle,
  startServer,
  stopBetweenRuns,
  type StoppedBetweenRuns,
} from './lib/processes.js';
import { measuredRun, rotated, stoppable } from './lib/scenarios.js';
import { DATASET_SIZES, loadSettings } from './lib/settings.js';
import { median } from './lib/stats.js';
import { baselineArgs, SERVICE_ARGS } from './lib/targets.js';
import { findTools } from './lib/tools.js';
import { SERVICE_ENV, SERVICE_VARIANTS } from './lib/variants.js';
import { type Measurement, runWrk } from './lib/wrk.js';
import { type Stored, WORKLOADS } from './lib/workloads.js';

type Env = NodeJS.ProcessEnv;
type Variant = { readonly name: string; readonly env: Readonly<Record<string, string>> };

/** The pseudo-variant that is the bare node:http baseline (bench/baseline-server.ts). */
const BASELINE = 'baseline';
/** The generator-ceiling server's name as a target (`startCeiling`). */
const CEILING = 'ceiling';

function extraVariants(env: Env): Variant[] {
  return Object.entries(env)
    .filter(([key]) => key.startsWith('AB_ENV_'))
    .map(([key, value]) => ({
      name: key.slice('AB_ENV_'.length),
      env: Object.fromEntries(
        (value ?? '')
          .split(',')
          .filter(Boolean)
          .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)] as [string, string]),
      ),
    }));
}

/** The baseline itself, or a variant of it (AB_BASELINE=true): bench/baseline-server.ts, no database. */
function isBaseline(variant: Variant): boolean {
  return variant.name === BASELINE || variant.env.AB_BASELINE === 'true';
}

/** The node arguments of one variant: another build (AB_DIST), node flags (AB_FLAGS), a CPU profile. */
function variantArgs(
  variant: Variant,
  env: Env,
  profileDir: string,
  mappings: number,
): { args: string[]; env: Record<string, string> } {
  const profiled = (env.AB_PROFILE ?? '').split(',').includes(variant.name);
  if (profiled) mkdirSync(profileDir, { recursive: true });
  const {
    AB_DIST: dist,
    AB_FLAGS: flags,
    AB_BASELINE: _baseline,
    ...variantEnv
  } = variant.env as Record<string, string>;
  const serviceArgs = isBaseline(variant)
    ? baselineArgs(mappings)
    : dist === undefined
      ? SERVICE_ARGS
      : SERVICE_ARGS.map((a) => a.replace(/^(\.\/)?dist\//, `./${dist.replace(/^\.\//, '')}/`));
  const args0 = profiled ? ['--cpu-prof', '--cpu-prof-dir', profileDir, ...serviceArgs] : serviceArgs;
  // The variant's flags after the target's own node options (V8 takes the last of a flag given twice), before its script.
  const script = scriptIndex(args0);
  const extra = (flags ?? '').split(' ').filter(Boolean);
  return { args: [...args0.slice(0, script), ...extra, ...args0.slice(script)], env: variantEnv };
}

/** Where the script starts in node's arguments: the first that is neither an option nor an option's value. */
function scriptIndex(args: readonly string[]): number {
  const takesValue = new Set(['--import', '--require', '-r', '--cpu-prof-dir', '--loader']);
  for (let i = 0; i < args.length; i++) {
    if (takesValue.has(args[i]!)) i++;
    else if (!args[i]!.startsWith('-')) return i;
  }
  return args.length;
}

interface Tally {
  readonly rps: number[];
  /** CPU microseconds the service spent per request: much less sensitive to a busy machine than req/s. */
  readonly cpuUs: number[];
  /** wrk's p99 latency of each round, ms. */
  readonly p99Ms: number[];
  requests: number;
}

function printMedians(servers: readonly ChildServer[], tallies: Map<string, Tally>): void {
  const first = servers[0]!;
  const reference = tallies.get(first.name)!;
  for (const server of servers) {
    const tally = tallies.get(server.name)!;
    const rps = median(tally.rps);
    const cpu = median(tally.cpuUs);
    // Each round's ratio to the reference's figure in the same round: robust to load that changes between rounds.
    const pairedRps = median(tally.rps.map((r, i) => r / reference.rps[i]!));
    const cpuRatios = tally.cpuUs.map((c, i) => c / reference.cpuUs[i]!);
    process.stdout.write(
      `${server.name}: median ${Math.round(rps)} req/s, ${(rps / median(reference.rps)).toFixed(3)} x ${first.name} ` +
        `(median of round ratios ${pairedRps.toFixed(3)}); ` +
        `median ${cpu.toFixed(1)} us cpu/req, ${(cpu / median(reference.cpuUs)).toFixed(3)} x ${first.name} ` +
        `(round ratios: median ${median(cpuRatios).toFixed(3)}, ${Math.min(...cpuRatios).toFixed(3)}-${Math.max(...cpuRatios).toFixed(3)}); ` +
        `median p99 ${median(tally.p99Ms).toFixed(2)} ms; ` +
        `${tally.requests} requests in all (pid ${server.pid})\n`,
    );
    if (server.output.lines > 0) process.stdout.write(`  output: ${server.output.tail.slice(-3).join('\n  ')}\n`);
  }
}

/** The baseline's req/s as a share of the generator's ceiling, round by round (as the bench's `% ceiling`). */
function printGeneratorShare(tallies: Map<string, Tally>): void {
  const baseline = tallies.get(BASELINE);
  const ceiling = tallies.get(CEILING);
  if (baseline === undefined || ceiling === undefined) return;
  const shares = baseline.rps.map((r, i) => r / ceiling.rps[i]!);
  const share = median(shares);
  const verdict =
    share >= GENERATOR_BOUND_FRACTION
      ? 'GENERATOR-BOUND: the ratios above measure wrk, not the targets'
      : `under the ${Math.round(GENERATOR_BOUND_FRACTION * 100)} % that marks GENERATOR-BOUND`;
  process.stdout.write(
    `generator: the baseline at ${(share * 100).toFixed(0)} % of the ceiling's req/s (median of rounds; ` +
      `${(Math.min(...shares) * 100).toFixed(0)}-${(Math.max(...shares) * 100).toFixed(0)} %), ${verdict}\n`,
  );
}

async function main(): Promise<void> {
  const env = process.env;
  const wanted = (env.AB_VARIANTS ?? '').split(',').filter(Boolean);
  const variants = [{ name: BASELINE, env: {} }, ...SERVICE_VARIANTS, ...extraVariants(env)].filter((v) =>
    wanted.length === 0 ? v.name !== BASELINE : wanted.includes(v.name),
  );
  const workloadName = env.AB_WORKLOAD === undefined || env.AB_WORKLOAD === 'redirect' ? 'popular' : env.AB_WORKLOAD;
  const workload = WORKLOADS.find((w) => w.name === workloadName);
  if (workload === undefined) throw new Error(`AB_WORKLOAD=${env.AB_WORKLOAD}: popular, uniform or shorten`);
  const size = DATASET_SIZES.find((s) => s.mappings === Number(env.AB_MAPPINGS ?? 1000));
  if (size === undefined) throw new Error(`AB_MAPPINGS: one of ${DATASET_SIZES.map((s) => s.mappings).join(', ')}`);
  const settings = loadSettings();
  const rounds = Number(env.AB_ROUNDS ?? 5);
  const durationS = Number(env.AB_DURATION_S ?? 5);

  const dir = mkdtempSync(join(tmpdir(), 'urlshortener-ab-'));
  registerCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const backend =
    env.AB_BACKEND === 'postgres' ? postgresBackend(settings.postgresCandidate) : sqliteBackend(settings.dataDir);
  if (env.AB_BACKEND !== undefined && env.AB_BACKEND !== backend.name)
    throw new Error('AB_BACKEND: sqlite or postgres');
  const dataset = await backend.open(size, (text) => process.stdout.write(`${text}\n`));
  const notes: string[] = [];
  const db =
    backend.name === 'postgres' ? await pinDatabase(dataset.databaseUrl, settings.databaseCores, notes) : undefined;
  const vacuum = backend.name === 'postgres' ? await autovacuumNote(dataset.databaseUrl) : undefined;
  if (vacuum !== undefined) notes.push(vacuum);
  for (const note of [...notes, ...(db?.pinnedTo ? [`PostgreSQL pinned to core(s) ${db.pinnedTo}`] : [])])
    process.stdout.write(`${note}\n`);
  const servers: ChildServer[] = [];
  const targetData = new Map<string, TargetData>();
  const letters = new Map<string, string>();
  for (const variant of variants) {
    letters.set(variant.name, String.fromCharCode(65 + letters.size));
    const profileDir = env.AB_PROFILE_DIR ?? '/tmp/ab-prof';
    const { args, env: variantEnv } = variantArgs(variant, env, profileDir, size.mappings);
    const data = isBaseline(variant) ? undefined : await dataset.isolate(variant.name);
    const database: Record<string, string> = data === undefined ? {} : { DATABASE_URL: data.databaseUrl };
    const serviceEnv = { ...SERVICE_ENV, ...database, ...variantEnv };
    servers.push(await startServer(variant.name, node(args, settings.targetCores), serviceEnv));
    if (data !== undefined) targetData.set(variant.name, data);
  }
  if (variants.some((v) => v.name === BASELINE)) {
    const { nginx } = findTools(settings.generatorCores.length > 0);
    const { server, kind } = await startCeiling(nginx, dir, settings.targetCores);
    process.stdout.write(`generator ceiling: ${kind}\n`);
    letters.set(CEILING, String.fromCharCode(65 + letters.size));
    servers.push(server);
  }
  const stored: Stored = { mappings: size.mappings, popular: settings.popularCodes, dir };
  const measure = (server: ChildServer, seconds: number, round: number): Promise<Measurement> =>
    runWrk({
      url: server.baseUrl,
      script: workload.script,
      args: workload.args(stored, { round, tag: shortenTag(letters.get(server.name)!) }),
      durationS: seconds,
      connections: settings.connections,
      cores: settings.generatorCores,
      countStatuses: round === 0,
      expectedStatus: workload.expectedStatus,
    });
  const tallies = new Map<string, Tally>(servers.map((s) => [s.name, { rps: [], cpuUs: [], p99Ms: [], requests: 0 }]));
  // As the bench: every target idle before the next one runs, its work after the load its own.
  const pids = [...servers.map((s) => s.pid), ...(db ? [db.pid] : [])];
  for (const server of servers) {
    tallies.get(server.name)!.requests += (await measure(server, settings.warmupS, 0)).requests;
    await targetData.get(server.name)?.vacuum(); // the warm-up's dead rows are no measured run's
    await settle(pids);
  }
  // As the bench: only the target measured runs (`stopBetweenRuns`).
  // AB_KEEP_RUNNING=true: every target left running (to measure what the stops change);
  // AB_TOGETHER=true: every target loaded at once (each by a wrk of its own), sharing the target cores.
  const together = env.AB_TOGETHER === 'true';
  const stopped: StoppedBetweenRuns =
    env.AB_KEEP_RUNNING === 'true' || together
      ? { during: (_pid, work) => work(), release: async () => {}, warnings: [] }
      : await stopBetweenRuns(servers.map((s) => stoppable(s, targetData.get(s.name))));
  const run = (server: ChildServer, round: number) =>
    stopped.during(server.pid, () =>
      measuredRun(
        () => measure(server, durationS, round),
        { pid: server.pid, data: targetData.get(server.name) },
        { redirect: workload.kind === 'redirect', pids, database: db },
      ),
    );
  for (let round = 1; round <= rounds; round++) {
    const line: string[] = [];
    const order = rotated(servers, round - 1);
    const runs = together ? await Promise.all(order.map((s) => run(s, round))) : [];
    for (const [i, server] of order.entries()) {
      const tally = tallies.get(server.name)!;
      const { m, cpuUs, databaseCpuUs } = together ? runs[i]! : await run(server, round);
      const dbText = databaseCpuUs === undefined ? '' : ` + db ${databaseCpuUs.toFixed(1)}`;
      tally.rps.push(m.rps);
      tally.cpuUs.push(cpuUs);
      tally.p99Ms.push(m.p99Ms);
      tally.requests += m.requests;
      const flag = m.unexpected > 0 ? ` (${m.unexpected} unexpected)` : '';
      line.push(
        `${server.name} ${Math.round(m.rps)} (${cpuUs.toFixed(1)}${dbText} us cpu/req, p99 ${m.p99Ms.toFixed(1)} ms)${flag}`,
      );
    }
    process.stdout.write(`round ${round}: ${line.join('; ')}; load ${loadavg()[0]!.toFixed(2)}\n`);
  }
  await stopped.release();
  for (const warning of stopped.warnings) console.warn(warning);
  printMedians(servers, tallies);
  printGeneratorShare(tallies);
  for (const server of servers) await server.stop();
  await db?.release();
}

cleanUpOnSignals();
main()
  .catch((error: unknown) => {
    process.stderr.write(`ab failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  })
  .finally(async () => {
    await cleanUpAll();
    process.exit();
  });
