/** The printed tables and the JSON file of a run. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname } from 'node:path';
import { baselineTwins, type Check, disturbedCeilingRounds, featureChecks, workersInfo } from './checks.js';
import type { ScenarioResult, TargetResult } from './scenarios.js';
import { integer } from './stats.js';
import type { BenchSettings } from './settings.js';
import { USER_AGENT } from './settings.js';
import { SERVICE_ENV, type ServiceVariant } from './variants.js';

const decimal = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : '-');
const mebibytes = (bytes: number | undefined) => (bytes === undefined ? '-' : decimal(bytes / 2 ** 20, 0));

/** `align` has one letter per column: `l` left, `r` right. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[], align: string): string {
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (align[i] === 'r' ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

export const TARGET_HEADER = [
  'target',
  'req/s',
  'p50 ms',
  'p99 ms',
  'CPU us/req',
  'x baseline',
  'p99 x base',
  '% ceiling',
  'RSS MiB',
  'unexpected',
];
const TARGET_ALIGN = 'lrrrrrrrrr';

/** A target's CPU time a request, and the database's beside it where it was counted: "24.2 + 9.8 db". */
export function cpuText(t: TargetResult, format: (n: number) => string): string {
  const db = t.databaseCpuUsPerRequest;
  return db === undefined ? format(t.cpuUsPerRequest) : `${format(t.cpuUsPerRequest)} + ${format(db)} db`;
}

/**
 * The baseline `target` is shown against in the tables (× baseline, p99 × baseline): the first
 * baseline, for the services and for the second baseline (its ratio to the first is the
 * yardstick's own check); none for the ceiling and the first baseline itself.
 */
export function comparedBaseline(target: TargetResult, result: ScenarioResult): TargetResult | undefined {
  const baseline = result.targets.find((t) => t.kind === 'baseline');
  return target.kind === 'ceiling' || target === baseline ? undefined : baseline;
}

export function targetRow(target: TargetResult, result: ScenarioResult): string[] {
  const baseline = comparedBaseline(target, result);
  const ceiling = result.targets.find((t) => t.kind === 'ceiling');
  return [
    target.kind === 'ceiling' ? `ceiling (${result.ceilingServer})` : target.name,
    integer(target.rps),
    decimal(target.p50Ms, 2),
    decimal(target.p99Ms, 2),
    cpuText(target, (n) => decimal(n, 1)),
    baseline ? decimal(target.rps / baseline.rps) : '',
    baseline ? decimal(target.p99Ms / baseline.p99Ms) : '',
    ceiling !== undefined && target !== ceiling ? `${decimal((target.rps / ceiling.rps) * 100, 0)}%` : '',
    mebibytes(target.rssBytes),
    integer(target.unexpected),
  ];
}

function warnings(result: ScenarioResult): string[] {
  return [
    ...disturbedCeilingRounds(result).map((round) => `generator ceiling disturbed in ${round}`),
    ...result.targets.flatMap((t) => [
      ...t.problems.map((problem) => `${t.name}: ${problem}`),
      ...(t.unexpected > 0
        ? [`${t.name}: ${t.unexpected} socket errors or wrong statuses; warm-up statuses ${JSON.stringify(t.statuses)}`]
        : []),
      ...(t.created !== undefined &&
      (t.created.stored < t.created.acknowledged || t.created.stored > t.created.acknowledged + t.created.inFlightMax)
        ? [`${t.name}: ${t.created.acknowledged} creations acknowledged but ${t.created.stored} rows stored`]
        : []),
      ...(t.outputLines > 0
        ? [`${t.name}: wrote ${t.outputLines} lines of output; last:\n      ${t.outputTail.join('\n      ')}`]
        : []),
    ]),
  ];
}

export function checkLine(c: Check, percent: boolean): string {
  const show = (v: number) => (percent ? `${(v * 100).toFixed(1)}%` : decimal(v));
  const value = `${show(c.value)}${c.spread === undefined ? '' : ` [${show(c.spread[0])}..${show(c.spread[1])}]`}`;
  const limit = percent ? `${(c.limit * 100).toFixed(0)}%` : decimal(c.limit);
  return `${c.verdict.padEnd(15)} ${c.target}: ${c.measure} = ${value} (budget ${c.op} ${limit})${c.note ? `; ${c.note}` : ''}`;
}

/** The scenario's table, its feature-cost checks, the shorten durability counts and warnings. */
export function printScenario(result: ScenarioResult, variants: readonly ServiceVariant[]): void {
  const out = process.stdout;
  const rows = result.targets.map((t) => targetRow(t, result));
  out.write(`${formatTable(TARGET_HEADER, rows, TARGET_ALIGN).replace(/^/gm, '  ')}\n`);
  const twins = baselineTwins(result);
  if (twins !== undefined) out.write(`  ${twins.agree ? '' : 'WARNING '}${twins.text}\n`);
  for (const c of featureChecks(result, variants)) out.write(`  ${checkLine(c, true)}\n`);
  const info = workersInfo(result);
  if (info !== undefined) out.write(`  ${info}\n`);
  for (const t of result.targets) {
    if (t.cacheMissRatio !== undefined)
      out.write(
        `  ${t.name}: ${decimal(t.cacheMissRatio * 100, 1)}% of its redirect-cache lookups missed in the rounds\n`,
      );
    if (t.created !== undefined) {
      out.write(
        `  ${t.name}: ${integer(t.created.acknowledged)} creations acknowledged, ${integer(t.created.stored)} rows with its codes stored\n`,
      );
    }
  }
  for (const warning of warnings(result)) out.write(`  WARNING ${warning}\n`);
}

export function printSummary(
  results: readonly ScenarioResult[],
  checks: readonly Check[],
  settings: BenchSettings,
): void {
  const out = process.stdout;
  const load = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  out.write(
    `\n== Summary (load average now ${load}, ${cpus().length} CPUs): medians of ${settings.rounds} round(s) of ${settings.durationS} s per target, `,
  );
  out.write(`${settings.connections} connections, User-Agent "${USER_AGENT}"\n\n`);
  const measured = results.flatMap((result) => result.targets.map((t) => [result.id, ...targetRow(t, result)]));
  out.write(`${formatTable(['scenario', ...TARGET_HEADER], measured, `l${TARGET_ALIGN}`)}\n\n`);
  for (const c of checks) out.write(`${checkLine(c, c.measure.endsWith('cost'))}  [${c.scenario}]\n`);
  for (const info of results.map((r) => (workersInfo(r) ? `${workersInfo(r)}  [${r.id}]` : undefined))) {
    if (info !== undefined) out.write(`${info}\n`);
  }
  const count = (verdict: Check['verdict']) => checks.filter((c) => c.verdict === verdict).length;
  out.write(
    `\n${checks.length} budget checks: ${count('PASS')} PASS, ${count('FAIL')} FAIL, ${count('GENERATOR-BOUND')} GENERATOR-BOUND, ${count('INVALID')} INVALID` +
      ` (benchmarks inform; the exit status does not depend on them)\n`,
  );
}

/** A dataset of the run: loaded (its seconds and phases', `LoadPhases.record`) or reused (null). */
export interface DatasetRecord {
  readonly backend: string;
  readonly mappings: number;
  readonly loadSeconds: number | null;
  readonly loadPhases?: Record<string, number> | null;
}

export interface RunRecord {
  readonly startedAt: Date;
  readonly settings: BenchSettings;
  readonly tools: readonly string[];
  readonly postgres: string;
  readonly variants: readonly ServiceVariant[];
  readonly datasets: readonly DatasetRecord[];
  readonly notes: readonly string[];
  readonly results: readonly ScenarioResult[];
  readonly checks: readonly Check[];
}

export function writeJson(file: string, run: RunRecord): void {
  const machine = { node: process.version, cpus: cpus().length, cpuModel: cpus()[0]?.model, loadavg: loadavg() };
  const { dataDir: _dataDir, postgresCandidate: _url, ...settings } = run.settings;
  const json = {
    startedAt: run.startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    machine,
    tools: run.tools,
    settings: { ...settings, userAgent: USER_AGENT },
    postgres: run.postgres,
    serviceEnv: { ...SERVICE_ENV, SECRET_KEY: '(random, per run)' },
    variants: run.variants,
    datasets: run.datasets,
    notes: run.notes,
    scenarios: run.results,
    checks: run.checks,
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(json, null, 2)}\n`);
}
