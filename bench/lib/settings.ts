/** What a bench run measures and for how long, read from `BENCH_*` variables. */
import { cpus } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './processes.js';

export interface BenchSettings {
  /** Seconds of each measured run of one target. */
  readonly durationS: number;
  /** Seconds of the warm-up run of each target before the rounds (with exact status counts). */
  readonly warmupS: number;
  /** Rounds of (every target), the order rotating each round; medians and spreads are reported. */
  readonly rounds: number;
  readonly connections: number;
  /** How many stored codes the popular-codes mix cycles over. */
  readonly popularCodes: number;
  /** Scenario filters (see `selectScenarios`); empty selects every scenario. */
  readonly scenarios: readonly string[];
  /** Variant names to run; empty runs every variant. */
  readonly variants: readonly string[];
  /** Extra variants from `BENCH_VARIANT_<NAME>=KEY=value,...`. */
  readonly extraVariants: readonly { readonly name: string; readonly env: Readonly<Record<string, string>> }[];
  /** PostgreSQL to measure on: DATABASE_URL when postgres://, else the test database if it answers. */
  readonly postgresCandidate: string;
  readonly postgresFromEnv: boolean;
  /** Cores wrk runs on (its thread count) and cores every target runs on; empty: no pinning. */
  readonly generatorCores: readonly number[];
  readonly targetCores: readonly number[];
  /** Cores the PostgreSQL server's processes are pinned to for a PostgreSQL group (default: the target cores). */
  readonly databaseCores: readonly number[];
  /** Where loaded datasets are kept between runs. */
  readonly dataDir: string;
}

type Env = Readonly<Record<string, string | undefined>>;

/** Fixed on every request, as the budgets require (the wrk scripts send the same). */
export const USER_AGENT = 'urlshortener-bench/1.0';
export const SAMPLE_SEED = 20240101;
export const TEST_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

/** The table sizes every workload runs at. */
export const DATASET_SIZES = [
  { label: '1k', mappings: 1_000 },
  { label: '10m', mappings: 10_000_000 },
] as const;
export type DatasetSize = (typeof DATASET_SIZES)[number];

export const HELP = `npm run bench: the service against a bare node:http baseline and a generator-ceiling server,
driven by wrk (pinned with taskset), checked against design.md §4.

Environment:
  BENCH_DURATION_S     seconds per measured run (default 4; quick 3)
  BENCH_WARMUP_S       seconds of warm-up per target and scenario (default 2; quick 1)
  BENCH_ROUNDS         rounds per scenario, every target once per round, the order rotating each
                       round (A B C, B C A, C A B, ...); each ratio is the median of the rounds'
                       own ratios, with its spread (default 5; quick 2). Every scenario with the
                       defaults is about 24 min of load (the plan printed first says how much),
                       plus start-up, settling and, the first time, loading 10M mappings; quick
                       about 8 min
  BENCH_QUICK          1: the quick defaults above, for trying something out (too few rounds for
                       the feature costs, whose spread then goes unreported)
  BENCH_CONNECTIONS    concurrent connections (default 64)
  BENCH_POPULAR_CODES  stored codes the popular-codes mix cycles over, drawn with a fixed seed;
                       all of them when the table is smaller (default 10000)
  BENCH_SCENARIOS      comma-separated filters on scenario ids, each a set of dash-separated parts:
                       "redirect", "uniform", "shorten", "sqlite-1k", "postgres-shorten-10m", "workers"
  BENCH_VARIANTS       comma-separated service variant names (default: all; "default" always runs)
  BENCH_VARIANT_<NAME> an extra variant: BENCH_VARIANT_visits='VISITS_ENABLED=false,FOO=1'
  BENCH_GENERATOR_CORES  cores for wrk (default "0"; wrk gets one thread per core)
  BENCH_TARGET_CORES     cores for every server (default: all the others)
  BENCH_DATABASE_CORES   cores for a local PostgreSQL server's processes during its scenarios
                         (default: the target cores; its CPU is reported beside the service's)
  BENCH_DATA_DIR       where loaded datasets are kept and reused (default bench/.data)
  DATABASE_URL         postgres://... : the PostgreSQL scenarios run there; otherwise on
                       ${TEST_DATABASE_URL} when it answers
Needs: wrk, taskset (util-linux), nginx (the ceiling server; without it a node:net stand-in is used).
`;

function positiveNumber(env: Env, name: string, fallback: number, integer: boolean): number {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new Error(`${name}=${raw}: must be a positive ${integer ? 'integer' : 'number'}\n\n${HELP}`);
  }
  return value;
}

function list(env: Env, name: string): string[] {
  return (env[name] ?? '')
    .split(',')
    .map((item) => item.trim().toLowerCase())
    .filter((item) => item !== '');
}

function coreList(env: Env, name: string): number[] | undefined {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === '') return undefined;
  const cores = raw.split(',').map(Number);
  if (cores.some((c) => !Number.isInteger(c) || c < 0 || c >= cpus().length)) {
    throw new Error(`${name}=${raw}: must list cores 0..${cpus().length - 1}`);
  }
  return cores;
}

/** wrk on core 0, the servers on the rest; no pinning on a one-core machine. */
function pinning(env: Env): Pick<BenchSettings, 'generatorCores' | 'targetCores' | 'databaseCores'> {
  const all = cpus().map((_, i) => i);
  const generatorCores = coreList(env, 'BENCH_GENERATOR_CORES') ?? (all.length > 1 ? [0] : []);
  const targetCores = coreList(env, 'BENCH_TARGET_CORES') ?? all.filter((c) => !generatorCores.includes(c));
  const databaseCores = coreList(env, 'BENCH_DATABASE_CORES') ?? targetCores;
  return generatorCores.length === 0 || targetCores.length === 0
    ? { generatorCores: [], targetCores: [], databaseCores: [] }
    : { generatorCores, targetCores, databaseCores };
}

function extraVariants(env: Env): BenchSettings['extraVariants'] {
  return Object.entries(env)
    .filter(([key, value]) => key.startsWith('BENCH_VARIANT_') && value !== undefined)
    .map(([key, value]) => ({
      name: key.slice('BENCH_VARIANT_'.length).toLowerCase().replace(/_/g, '-'),
      env: Object.fromEntries(
        value!
          .split(',')
          .filter((kv) => kv.includes('='))
          .map((kv) => [kv.slice(0, kv.indexOf('=')).trim(), kv.slice(kv.indexOf('=') + 1)]),
      ),
    }));
}

export function loadSettings(env: Env = process.env): BenchSettings {
  const databaseUrl = env.DATABASE_URL?.trim() ?? '';
  const postgresFromEnv = /^postgres(ql)?:\/\//.test(databaseUrl);
  const quick = env.BENCH_QUICK === '1' || env.BENCH_QUICK === 'true';
  return {
    durationS: positiveNumber(env, 'BENCH_DURATION_S', quick ? 3 : 4, false),
    warmupS: positiveNumber(env, 'BENCH_WARMUP_S', quick ? 1 : 2, false),
    rounds: positiveNumber(env, 'BENCH_ROUNDS', quick ? 2 : 5, true),
    connections: positiveNumber(env, 'BENCH_CONNECTIONS', 64, true),
    popularCodes: positiveNumber(env, 'BENCH_POPULAR_CODES', 10_000, true),
    scenarios: list(env, 'BENCH_SCENARIOS'),
    variants: list(env, 'BENCH_VARIANTS'),
    extraVariants: extraVariants(env),
    postgresCandidate: postgresFromEnv ? databaseUrl : TEST_DATABASE_URL,
    postgresFromEnv,
    ...pinning(env),
    dataDir: env.BENCH_DATA_DIR?.trim() || join(ROOT, 'bench', '.data'),
  };
}
