/**
 * `npm run bench`: the service against a bare node:http baseline and a generator-ceiling server,
 * driven by wrk on 127.0.0.1 in rounds whose target order rotates, with the generator and the servers pinned to different
 * cores, and checked against the budgets of design.md §4. Settings: see HELP in lib/settings.ts.
 * Results: printed, written to bench/results/latest.json with a chart (latest.svg), and, after a
 * run of every scenario, summarised in bench/README.md (`node --import tsx bench/readme.ts`
 * writes that section from latest.json at any time).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { evaluate } from './lib/checks.js';
import { cleanUpAll, cleanUpOnSignals, registerCleanup } from './lib/cleanup.js';
import { type DatabaseProcesses, pinDatabase } from './lib/database-cores.js';
import {
  autovacuumNote,
  type Dataset,
  postgresAnswers,
  postgresBackend,
  sqliteBackend,
  type StorageBackend,
} from './lib/datasets.js';
import { phaseList } from './lib/phases.js';
import { ROOT } from './lib/processes.js';
import { writeResultsDocs } from './lib/readme.js';
import { printScenario, printSummary, type RunRecord, writeJson } from './lib/report.js';
import { allScenarios, runScenario, type Scenario, type ScenarioResult, selectScenarios } from './lib/scenarios.js';
import { type BenchSettings, DATASET_SIZES, HELP, loadSettings } from './lib/settings.js';
import { serviceSpecs, startTargets, stopTargets, type TargetSpec } from './lib/targets.js';
import { findTools, type Tools } from './lib/tools.js';
import { selectVariants, serviceKnows, type ServiceVariant, WORKERS_SETTING } from './lib/variants.js';

const RESULTS_FILE = join(ROOT, 'bench', 'results', 'latest.json');
const say = (text: string) => process.stdout.write(`bench: ${text}\n`);

async function backends(settings: BenchSettings, notes: string[]): Promise<StorageBackend[]> {
  const sqlite = sqliteBackend(settings.dataDir);
  const problem = await postgresAnswers(settings.postgresCandidate);
  if (problem === undefined) return [sqlite, postgresBackend(settings.postgresCandidate)];
  if (settings.postgresFromEnv)
    throw new Error(`DATABASE_URL is postgres:// but PostgreSQL does not answer: ${problem}`);
  notes.push(
    `PostgreSQL scenarios skipped: the test database does not answer (${problem}); start it or set DATABASE_URL=postgres://...`,
  );
  return [sqlite];
}

function groupSpecs(scenario: Scenario, variants: readonly ServiceVariant[]): TargetSpec[] {
  const ceiling: TargetSpec = { name: 'ceiling', kind: 'ceiling' };
  // Two copies of the baseline: a ratio holds only while they agree (`baselineTwins`).
  const baselines: TargetSpec[] = [
    { name: 'baseline', kind: 'baseline' },
    { name: 'baseline-2', kind: 'baseline' },
  ];
  if (scenario.group === 'main') return [ceiling, ...baselines, ...serviceSpecs(variants)];
  const [reference] = variants;
  const workers = (n: number): ServiceVariant => ({
    name: `workers-${n}`,
    env: { ...reference!.env, [WORKERS_SETTING]: String(n) },
  });
  return [ceiling, ...serviceSpecs([workers(1), workers(2)])];
}

function printPlan(
  scenarios: readonly Scenario[],
  variants: readonly ServiceVariant[],
  settings: BenchSettings,
  tools: Tools,
): void {
  const perTarget = settings.warmupS + settings.rounds * settings.durationS;
  const seconds = scenarios.reduce((sum, s) => sum + groupSpecs(s, variants).length * perTarget, 0);
  // A main group's targets when there is one, else the workers group's.
  const shown = scenarios.find((s) => s.group === 'main') ?? scenarios[0];
  const targets = (shown === undefined ? [] : groupSpecs(shown, variants)).map((spec) => spec.name).join(', ');
  for (const note of tools.notes) say(note);
  say(
    settings.generatorCores.length > 0
      ? `pinning: wrk on core(s) ${settings.generatorCores.join(',')} (${settings.generatorCores.length} thread(s)), every server on core(s) ${settings.targetCores.join(',')}, ` +
          `a local PostgreSQL's processes on core(s) ${settings.databaseCores.join(',')} during its scenarios`
      : 'pinning: none (one CPU, or BENCH_*_CORES left no core for one side): generator and servers share the CPU',
  );
  say(`${scenarios.length} scenario(s): ${scenarios.map((s) => s.id).join(', ')}`);
  say(
    `targets: ${targets}; ${settings.rounds} round(s) of ${settings.durationS} s ` +
      `after ${settings.warmupS} s of warm-up; ${settings.connections} connections; about ${(seconds / 60).toFixed(1)} min of load plus loading and start-up`,
  );
}

/** PostgreSQL's processes on BENCH_DATABASE_CORES for the group's runs, their CPU counted (lib/database-cores.ts). */
async function pinnedDatabase(dataset: Dataset, settings: BenchSettings): Promise<DatabaseProcesses | undefined> {
  const notes: string[] = [];
  const database = await pinDatabase(dataset.databaseUrl, settings.databaseCores, notes);
  const vacuum = await autovacuumNote(dataset.databaseUrl);
  if (vacuum !== undefined) notes.push(vacuum);
  for (const note of notes) say(`  ${note}`);
  if (database?.pinnedTo !== undefined)
    say(`  PostgreSQL (pid ${database.pid}) pinned to core(s) ${database.pinnedTo} (was ${database.before})`);
  return database;
}

async function runGroup(
  group: readonly Scenario[],
  dataset: Dataset,
  variants: readonly ServiceVariant[],
  context: { settings: BenchSettings; tools: Tools; dir: string },
): Promise<ScenarioResult[]> {
  const specs = groupSpecs(group[0]!, variants);
  const database = dataset.backend === 'postgres' ? await pinnedDatabase(dataset, context.settings) : undefined;
  const results: ScenarioResult[] = [];
  try {
    const targets = await startTargets(specs, dataset, context.settings, context.tools.nginx, context.dir);
    try {
      for (const scenario of group) {
        const result = await runScenario(scenario, dataset, targets, context.settings, context.dir, database);
        printScenario(result, variants);
        results.push(result);
      }
    } finally {
      await stopTargets(targets);
    }
  } finally {
    await database?.release();
  }
  return results;
}

async function main(): Promise<void> {
  if (process.argv.includes('--help')) return void process.stdout.write(HELP);
  const settings = loadSettings();
  const tools = findTools(settings.generatorCores.length > 0);
  const variants = selectVariants(settings.variants, settings.extraVariants);
  if (!existsSync(join(ROOT, 'dist', 'cli.js'))) throw new Error('dist/cli.js is missing: run `npm run build` first');
  const notes: string[] = [];
  const stores = await backends(settings, notes);
  let scenarios = selectScenarios(allScenarios(stores.map((b) => b.name)), settings.scenarios);
  if (scenarios.some((s) => s.group === 'workers') && !serviceKnows(WORKERS_SETTING)) {
    notes.push(
      `"1 against 2 serving processes" skipped: the service has no ${WORKERS_SETTING} setting yet (src/config/config.ts)`,
    );
    scenarios = scenarios.filter((s) => s.group !== 'workers');
  }
  for (const note of notes) say(note);
  printPlan(scenarios, variants, settings, tools);
  const dir = mkdtempSync(join(tmpdir(), 'urlshortener-bench-'));
  registerCleanup(() => rmSync(dir, { recursive: true, force: true }));

  const startedAt = new Date();
  const results: ScenarioResult[] = [];
  const datasets: RunRecord['datasets'][number][] = [];
  for (const store of stores) {
    for (const size of DATASET_SIZES) {
      const inSize = scenarios.filter((s) => s.backend === store.name && s.size === size);
      if (inSize.length === 0) continue;
      say(`${store.name} (${store.where}), ${size.mappings.toLocaleString('en-US')} mappings:`);
      const dataset = await store.open(size, (text) => say(`  ${text}`));
      if (dataset.loadSeconds !== undefined)
        say(`  loaded in ${dataset.loadSeconds.toFixed(1)} s (${phaseList(dataset.loadPhases ?? {})})`);
      datasets.push({
        backend: store.name,
        mappings: size.mappings,
        loadSeconds: dataset.loadSeconds ?? null,
        loadPhases: dataset.loadPhases ?? null,
      });
      for (const kind of ['main', 'workers'] as const) {
        const group = inSize.filter((s) => s.group === kind);
        if (group.length > 0) results.push(...(await runGroup(group, dataset, variants, { settings, tools, dir })));
      }
    }
  }

  const checks = evaluate(results, variants);
  printSummary(results, checks, settings);
  const record: RunRecord = {
    startedAt,
    settings,
    tools: tools.notes,
    postgres: stores.find((s) => s.name === 'postgres')?.where ?? 'not measured',
    variants,
    datasets,
    notes,
    results,
    checks,
  };
  writeJson(RESULTS_FILE, record);
  const complete = settings.scenarios.length === 0 && settings.variants.length === 0;
  for (const line of writeResultsDocs(RESULTS_FILE, { readme: complete })) say(line);
}

cleanUpOnSignals();
main()
  .catch((error: unknown) => {
    process.stderr.write(
      `\nbench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  })
  .finally(async () => {
    await cleanUpAll();
    process.exit();
  });
