import { randomBytes } from 'node:crypto';
import { SETTINGS } from '../../src/config/config.js';
import type { WorkloadKind } from './workloads.js';

/**
 * The service configurations a run compares. Each runs as its own process next to the baseline
 * and the ceiling server, in the same rounds (their order rotating), so their numbers are comparable.
 *
 * The first variant is the reference: every default on (rate limiting, metrics, click counting,
 * tracing as installed by default). The baseline budgets apply to it, and every other variant
 * with a `featureCost` is compared with it (design.md §4):
 *
 * - `tracing`: tracing on at ratio 0.1 with no OTLP endpoint (spans are processed, then dropped);
 *   it may cost at most 10% of the default's requests/s on redirects, 15% on `POST /shorten`.
 * - `no-rate-limit`: rate limiting off. The default has it on, so its cost is
 *   1 − default rps / no-rate-limit rps, at most 5% on redirects.
 *
 * More variants (visit recording, ...) are added here, or for one run without editing anything
 * with `BENCH_VARIANT_<NAME>=KEY=value,...`. The names in `env` are the service's own settings
 * (src/config/config.ts): a misspelt one would silently measure the default twice, which
 * `selectVariants` guards against.
 */

/**
 * The environment of every service process, under each variant's own `env`: production mode
 * (which needs a SECRET_KEY) with its defaults, except that the `writes` and `redirects` rate
 * limits (60 requests a minute, and 50,000 a second, per client by default) are raised far above
 * what one load generator can send, so that the bench measures the write and redirect paths and
 * not 429s: every request of wrk comes from one address, where a real service sees many. Rate
 * limiting stays on: every request is decided, counted and answered with its headers as before
 * (on a quiet machine the service answered more than 50,000 redirects a second, and the default
 * limit then refused some, as it should).
 */
export const SERVICE_ENV: Readonly<Record<string, string>> = {
  NODE_ENV: 'production',
  LOG_LEVEL: 'warn',
  SECRET_KEY: randomBytes(48).toString('base64'),
  RATE_LIMIT_WRITES_LIMIT: '1000000000',
  RATE_LIMIT_WRITES_WINDOW_S: '1',
  RATE_LIMIT_REDIRECTS_LIMIT: '1000000000',
  RATE_LIMIT_REDIRECTS_WINDOW_S: '1',
};

export interface FeatureCost {
  /** What the feature is, for the report: "tracing (ratio 0.1)", "rate limiting". */
  readonly label: string;
  /**
   * `on`: this variant turns a feature on, so its cost is 1 − variant rps / reference rps.
   * `off`: this variant turns a feature off, so its cost is 1 − reference rps / variant rps.
   */
  readonly feature: 'on' | 'off';
  /** Largest acceptable cost per workload kind, as a fraction (0.10 = 10%); none: not budgeted. */
  readonly max: Partial<Record<WorkloadKind, number>>;
}

export interface ServiceVariant {
  /** Short kebab-case name, shown in the tables and accepted by BENCH_VARIANTS. */
  readonly name: string;
  /** Added to the service's environment, over SERVICE_ENV and the bench's PORT, HOST and DATABASE_URL. */
  readonly env: Readonly<Record<string, string>>;
  /** The budget of the feature this variant toggles, checked against the reference variant. */
  readonly featureCost?: FeatureCost;
}

export const SERVICE_VARIANTS: readonly ServiceVariant[] = [
  { name: 'default', env: {} },
  {
    name: 'tracing',
    env: { TRACING_SAMPLER: 'ratio', TRACING_SAMPLING_RATE: '0.1', OTEL_EXPORTER_OTLP_ENDPOINT: '' },
    featureCost: { label: 'tracing (ratio 0.1)', feature: 'on', max: { redirect: 0.1, shorten: 0.15 } },
  },
  {
    name: 'no-rate-limit',
    env: { RATE_LIMIT_ENABLED: 'false' },
    featureCost: { label: 'rate limiting', feature: 'off', max: { redirect: 0.05 } },
  },
  {
    name: 'no-visits',
    env: { VISIT_RECORDING: 'false' },
    featureCost: { label: 'visit recording', feature: 'off', max: { redirect: 0.1 } },
  },
];

/** The setting the "1 against 2 serving processes" scenario needs; it is skipped while the service lacks it. */
export const WORKERS_SETTING = 'WORKERS';

export function serviceKnows(setting: string): boolean {
  return Object.values(SETTINGS).some((s) => s.name === setting);
}

/** The variants named in `names` (all when empty) plus `extra`, always led by the reference variant. */
export function selectVariants(names: readonly string[], extra: readonly ServiceVariant[] = []): ServiceVariant[] {
  const all = [...SERVICE_VARIANTS, ...extra];
  const unknown = names.filter((name) => !all.some((v) => v.name === name));
  if (unknown.length > 0) {
    throw new Error(`BENCH_VARIANTS: unknown ${unknown.join(', ')}; known: ${all.map((v) => v.name).join(', ')}`);
  }
  const selected = all.filter((v, i) => i === 0 || names.length === 0 || names.includes(v.name));
  assertKnownSettings([{ name: 'SERVICE_ENV', env: SERVICE_ENV }, ...selected]);
  return selected;
}

/** Every variable a variant sets must be a setting the service reads; a stale name would measure nothing. */
function assertKnownSettings(variants: readonly Pick<ServiceVariant, 'name' | 'env'>[]): void {
  const stale = variants.flatMap((v) =>
    Object.keys(v.env)
      .filter((key) => !serviceKnows(key))
      .map((key) => `${v.name}: ${key}`),
  );
  if (stale.length > 0) throw new Error(`bench variants set unknown service settings: ${stale.join(', ')}`);
}
