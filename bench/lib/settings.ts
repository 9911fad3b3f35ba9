/** What a bench run measures and for how long, read from `BENCH_*` variables. */

export interface BenchSettings {
  /** Seconds of each measured run of one target. */
  readonly durationS: number;
  /** Seconds of the warm-up run of each target before the rounds. */
  readonly warmupS: number;
  /** Rounds of (baseline, every service variant), alternating; the median round is reported. */
  readonly rounds: number;
  readonly connections: number;
  /** How many stored codes the redirect workload cycles over ("popular links"). */
  readonly popularCodes: number;
  /** Scenario filters (see `selectScenarios`); empty selects every scenario. */
  readonly scenarios: readonly string[];
  /** Variant names to run; empty runs every variant. */
  readonly variants: readonly string[];
  /** Set when `DATABASE_URL` is a postgres:// URL: the PostgreSQL scenarios run too. */
  readonly postgresUrl: string | undefined;
}

type Env = Readonly<Record<string, string | undefined>>;

/** Fixed on every request, as the budgets require. */
export const USER_AGENT = 'urlshortener-bench/1.0';
export const SAMPLE_SEED = 20240101;

/** The table sizes every workload runs at. */
export const DATASET_SIZES = [
  { label: '1k', mappings: 1_000 },
  { label: '1m', mappings: 1_000_000 },
] as const;
export type DatasetSize = (typeof DATASET_SIZES)[number];

export const HELP = `Environment:
  BENCH_DURATION_S     seconds per measured run (default 5)
  BENCH_WARMUP_S       seconds of warm-up per target and scenario (default 2)
  BENCH_ROUNDS         alternating rounds per scenario; medians are reported (default 3)
  BENCH_CONNECTIONS    concurrent connections (default 64)
  BENCH_POPULAR_CODES  stored codes the redirect requests cycle over, drawn uniformly with a
                       fixed seed; all of them when the table is smaller (default 10000)
  BENCH_SCENARIOS      comma-separated filters, e.g. "redirect", "sqlite-1k", "postgres-shorten-1m"
  BENCH_VARIANTS       comma-separated service variant names (default: all)
  DATABASE_URL         postgres://... adds the PostgreSQL scenarios
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

function postgresUrl(env: Env): string | undefined {
  const url = env.DATABASE_URL?.trim();
  return url !== undefined && /^postgres(ql)?:\/\//.test(url) ? url : undefined;
}

export function loadSettings(env: Env = process.env): BenchSettings {
  return {
    durationS: positiveNumber(env, 'BENCH_DURATION_S', 5, false),
    warmupS: positiveNumber(env, 'BENCH_WARMUP_S', 2, false),
    rounds: positiveNumber(env, 'BENCH_ROUNDS', 3, true),
    connections: positiveNumber(env, 'BENCH_CONNECTIONS', 64, true),
    popularCodes: positiveNumber(env, 'BENCH_POPULAR_CODES', 10_000, true),
    scenarios: list(env, 'BENCH_SCENARIOS'),
    variants: list(env, 'BENCH_VARIANTS'),
    postgresUrl: postgresUrl(env),
  };
}
