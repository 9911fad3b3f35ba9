/**
 * The servers a group of scenarios drives, all pinned to the same cores: the generator-ceiling
 * server, the bare node:http baseline, and the service in each variant on its own data.
 */
import { readFileSync } from 'node:fs';
import { startCeiling, type CeilingKind } from './ceiling.js';
import type { Dataset, TargetData } from './datasets.js';
import { type ChildServer, node, startServer } from './processes.js';
import type { BenchSettings } from './settings.js';
import { SERVICE_ENV, type ServiceVariant } from './variants.js';

export type TargetKind = 'ceiling' | 'baseline' | 'service';

export interface TargetSpec {
  readonly name: string;
  readonly kind: TargetKind;
  /** Services: the variant; its env is added to SERVICE_ENV. */
  readonly variant?: ServiceVariant;
  /** Services: one letter that starts every code its shorten runs create (see `shortenTag`). */
  readonly letter?: string;
}

export interface Target {
  readonly spec: TargetSpec;
  readonly server: ChildServer;
  readonly data?: TargetData;
  readonly ceilingKind?: CeilingKind;
}

/**
 * The node arguments `npm start` runs the service with (package.json's `start`: `exec node …`),
 * read from there so that the bench measures what users run: the instrumentation module (it loads
 * nothing while tracing is off) and V8's settings (a larger young generation, a faster-growing old
 * one: README, "Observability").
 */
export const SERVICE_ARGS = startArgs();

function startArgs(): string[] {
  const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    scripts: { start: string };
  };
  const [exec, command, ...args] = manifest.scripts.start.split(/\s+/);
  if (exec !== 'exec' || command !== 'node')
    throw new Error(`package.json start is not "exec node …": ${manifest.scripts.start}`);
  return args;
}

/** The baseline holds every mapping in a Map: 10,000,000 of them need more than V8's default heap. */
export function baselineArgs(mappings: number): string[] {
  const heap = mappings > 1_000_000 ? ['--max-old-space-size=8192'] : [];
  return [...heap, '--import', 'tsx', 'bench/baseline-server.ts', '--mappings', String(mappings)];
}

/** Target letters: A, B, C... in the order of the specs. */
export function serviceSpecs(variants: readonly ServiceVariant[]): TargetSpec[] {
  return variants.map((variant, i) => ({
    name: variant.name,
    kind: 'service',
    variant,
    letter: String.fromCharCode(65 + i),
  }));
}

async function startOne(
  spec: TargetSpec,
  dataset: Dataset,
  settings: BenchSettings,
  nginx: string | undefined,
  workDir: string,
): Promise<Target> {
  const cores = settings.targetCores;
  if (spec.kind === 'ceiling') {
    const { server, kind } = await startCeiling(nginx, workDir, cores);
    return { spec, server, ceilingKind: kind };
  }
  if (spec.kind === 'baseline') {
    return { spec, server: await startServer(spec.name, node(baselineArgs(dataset.size.mappings), cores), {}) };
  }
  const data = await dataset.isolate(spec.name);
  try {
    const env = { ...SERVICE_ENV, DATABASE_URL: data.databaseUrl, ...spec.variant!.env };
    return { spec, server: await startServer(spec.name, node(SERVICE_ARGS, cores), env), data };
  } catch (error) {
    await data.drop();
    throw error;
  }
}

/** Starts every target of `specs`, in order; on failure stops those already started. */
export async function startTargets(
  specs: readonly TargetSpec[],
  dataset: Dataset,
  settings: BenchSettings,
  nginx: string | undefined,
  workDir: string,
): Promise<Target[]> {
  const targets: Target[] = [];
  try {
    for (const spec of specs) targets.push(await startOne(spec, dataset, settings, nginx, workDir));
    return targets;
  } catch (error) {
    await stopTargets(targets);
    throw error;
  }
}

export async function stopTargets(targets: readonly Target[]): Promise<void> {
  for (const target of [...targets].reverse()) {
    await target.server.stop();
    await target.data?.drop();
  }
}
