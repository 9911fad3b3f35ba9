/** The printed tables and the JSON file of a run. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname } from 'node:path';
import type { Check } from './checks.js';
import type { ScenarioResult, TargetResult } from './scenarios.js';
import type { BenchSettings } from './settings.js';
import { USER_AGENT } from './settings.js';
import { SERVICE_ENV, type ServiceVariant } from './variants.js';

const integer = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '-');
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

const TARGET_HEADER = ['target', 'req/s', 'p50 ms', 'p99 ms', 'rps ratio', 'p99 ratio', 'RSS MiB', 'unexpected'];
const TARGET_ALIGN = 'lrrrrrrr';

function targetRow(target: TargetResult, baseline: TargetResult): string[] {
  const isBaseline = target === baseline;
  return [
    target.name,
    integer(target.rps),
    decimal(target.p50Ms, 1),
    decimal(target.p99Ms, 1),
    isBaseline ? '' : decimal(target.rps / baseline.rps),
    isBaseline ? '' : decimal(target.p99Ms / baseline.p99Ms),
    mebibytes(target.rssBytes),
    integer(target.unexpected),
  ];
}

function rows(result: ScenarioResult): string[][] {
  const baseline = result.targets.find((t) => t.kind === 'baseline')!;
  return result.targets.map((target) => targetRow(target, baseline));
}

function warnings(result: ScenarioResult): string[] {
  return result.targets.flatMap((t) => [
    ...t.probeProblems.map((problem) => `${t.name}: probe request answered wrongly: ${problem}`),
    ...(t.unexpected > 0
      ? [`${t.name}: ${t.unexpected} unexpected answers; statuses ${JSON.stringify(t.statuses)}`]
      : []),
    ...(t.outputLines > 0
      ? [`${t.name}: wrote ${t.outputLines} lines of output; last:\n      ${t.outputTail.join('\n      ')}`]
      : []),
  ]);
}

/** `featureCosts`: the scenario's feature budgets (see `featureChecks`), printed under its table. */
export function printScenario(result: ScenarioResult, featureCosts: readonly Check[] = []): void {
  const indent = (text: string) => text.replace(/^/gm, '  ');
  process.stdout.write(`${indent(formatTable(TARGET_HEADER, rows(result), TARGET_ALIGN))}\n`);
  for (const c of featureCosts) {
    process.stdout.write(
      `  ${c.pass ? 'PASS' : 'FAIL'} ${c.measure} = ${(c.value * 100).toFixed(1)}% (budget ${c.op} ${(c.limit * 100).toFixed(0)}%): ${c.note ?? ''}\n`,
    );
  }
  process.stdout.write(
    `  ${result.connections} connections; ratios are target / baseline; RSS after the scenario; rows in the table: ${integer(result.rowsBefore)} before, ${integer(result.rowsAfter)} after\n`,
  );
  for (const warning of warnings(result)) process.stdout.write(`  WARNING ${warning}\n`);
}

function checkRow(c: Check): string[] {
  return [
    c.pass ? 'PASS' : 'FAIL',
    c.scenario,
    c.target,
    c.measure,
    decimal(c.value),
    `${c.op} ${decimal(c.limit)}`,
    c.note ?? '',
  ];
}

export function printSummary(
  results: readonly ScenarioResult[],
  checks: readonly Check[],
  settings: BenchSettings,
): void {
  const measured = results.flatMap((result) => rows(result).map((row) => [result.id, ...row]));
  const out = process.stdout;
  out.write(
    `\n== Summary (load average now ${loadavg()
      .map((l) => l.toFixed(2))
      .join(
        ' ',
      )}, ${cpus().length} CPUs): medians of ${settings.rounds} round(s) of ${settings.durationS} s per target, `,
  );
  out.write(`${settings.connections} connections, User-Agent "${USER_AGENT}"\n`);
  out.write(
    `   redirect requests cycle over a fixed sample of up to ${settings.popularCodes.toLocaleString('en-US')} stored codes ("popular links")\n\n`,
  );
  out.write(`${formatTable(['scenario', ...TARGET_HEADER], measured, `l${TARGET_ALIGN}`)}\n\n`);
  out.write(
    `${formatTable(['budget', 'scenario', 'target', 'measure', 'value', 'limit', 'note'], checks.map(checkRow), 'llllrll')}\n`,
  );
  const failed = checks.filter((c) => !c.pass).length;
  out.write(`\n${checks.length - failed} of ${checks.length} budget checks pass`);
  out.write(` (benchmarks inform; the exit status does not depend on them)\n`);
}

export function writeJson(
  file: string,
  run: {
    readonly startedAt: Date;
    readonly settings: BenchSettings;
    readonly variants: readonly ServiceVariant[];
    readonly seeding: readonly { backend: string; mappings: number; seconds: number }[];
    readonly results: readonly ScenarioResult[];
    readonly checks: readonly Check[];
  },
): void {
  const { postgresUrl, ...settings } = run.settings;
  const machine = { node: process.version, cpus: cpus().length, cpuModel: cpus()[0]?.model, loadavg: loadavg() };
  const json = {
    startedAt: run.startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    machine,
    settings: { ...settings, postgres: postgresUrl !== undefined, userAgent: USER_AGENT },
    serviceEnv: { ...SERVICE_ENV, SECRET_KEY: '(random, per run)' },
    variants: run.variants,
    seeding: run.seeding,
    scenarios: run.results,
    checks: run.checks,
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(json, null, 2)}\n`);
}
