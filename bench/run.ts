/**
 * `npm run bench`: the service against a bare node:http baseline, driven alternately from this
 * process with autocannon on 127.0.0.1, and checked against the budgets of design.md §4.
 * Settings: see HELP in lib/settings.ts. Results: printed, and written to bench/results/latest.json.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { evaluate, featureChecks } from './lib/checks.js';
import { cleanUpAll, cleanUpOnSignals, registerCleanup } from './lib/cleanup.js';
import { postgresBackend, sqliteBackend, type StorageBackend } from './lib/datasets.js';
import { ROOT } from './lib/processes.js';
import { printScenario, printSummary, writeJson } from './lib/report.js';
import { allScenarios, runScenario, type Scenario, type ScenarioResult, selectScenarios } from './lib/scenarios.js';
import { type BenchSettings, DATASET_SIZES, HELP, loadSettings } from './lib/settings.js';
import { selectVariants, type ServiceVariant } from './lib/variants.js';

const RESULTS_FILE = join(ROOT, 'bench', 'results', 'latest.json');

function storageBackends(settings: BenchSettings): StorageBackend[] {
  const dir = mkdtempSync(join(tmpdir(), 'urlshortener-bench-'));
  registerCleanup(() => rmSync(dir, { recursive: true, force: true }));
  return settings.postgresUrl === undefined
    ? [sqliteBackend(dir)]
    : [sqliteBackend(dir), postgresBackend(settings.postgresUrl)];
}

function printPlan(scenarios: readonly Scenario[], variants: readonly ServiceVariant[], settings: BenchSettings): void {
  const targets = variants.length + 1;
  const seconds = scenarios.length * targets * (settings.warmupS + settings.rounds * settings.durationS);
  process.stdout.write(
    `bench: ${scenarios.length} scenario(s): ${scenarios.map((s) => s.id).join(', ')}\n` +
      `bench: targets: baseline, ${variants.map((v) => v.name).join(', ')}; ${settings.rounds} round(s) of ` +
      `${settings.durationS} s each after ${settings.warmupS} s of warm-up; ${settings.connections} connections\n` +
      `bench: about ${(seconds / 60).toFixed(1)} min of load, plus seeding and start-up\n`,
  );
  if (settings.postgresUrl === undefined)
    process.stdout.write('bench: DATABASE_URL is not postgres://, so SQLite only\n');
}

async function main(): Promise<void> {
  if (process.argv.includes('--help')) return void process.stdout.write(HELP);
  const settings = loadSettings();
  const variants = selectVariants(settings.variants);
  if (!existsSync(join(ROOT, 'dist', 'cli.js'))) throw new Error('dist/cli.js is missing: run `npm run build` first');
  const backends = storageBackends(settings);
  const scenarios = selectScenarios(allScenarios(backends.map((b) => b.name)), settings.scenarios);
  printPlan(scenarios, variants, settings);

  const startedAt = new Date();
  const results: ScenarioResult[] = [];
  const seeding: { backend: string; mappings: number; seconds: number }[] = [];
  for (const backend of backends) {
    for (const size of DATASET_SIZES) {
      const group = scenarios.filter((s) => s.backend === backend.name && s.size === size);
      if (group.length === 0) continue;
      process.stdout.write(
        `\nbench: seeding ${size.mappings.toLocaleString('en-US')} mappings into ${backend.name}... `,
      );
      const dataset = await backend.create(size);
      process.stdout.write(`${dataset.seedSeconds.toFixed(1)} s\n`);
      seeding.push({ backend: backend.name, mappings: size.mappings, seconds: dataset.seedSeconds });
      try {
        for (const scenario of group) {
          const result = await runScenario(scenario, dataset, variants, settings);
          printScenario(result, featureChecks(result, variants));
          results.push(result);
        }
      } finally {
        await dataset.drop();
      }
    }
  }

  const checks = evaluate(results, variants);
  printSummary(results, checks, settings);
  writeJson(RESULTS_FILE, { startedAt, settings, variants, seeding, results, checks });
  process.stdout.write(`results written to ${RESULTS_FILE}\n`);
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
