/**
 * From bench/results/latest.json: the chart (bench/results/latest.svg) and the results section
 * of bench/README.md, between its `bench-results` markers.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { type ChartScenario, renderChart } from './chart.js';
import type { Check } from './checks.js';
import { ROOT } from './processes.js';
import type { ScenarioResult, TargetResult } from './scenarios.js';
import { phaseList } from './phases.js';
import { comparedBaseline, cpuText, type DatasetRecord } from './report.js';

const README = join(ROOT, 'bench', 'README.md');
const START = '<!-- bench-results:start (written by bench/run.ts or bench/readme.ts from results/latest.json) -->';
const END = '<!-- bench-results:end -->';

interface RunJson {
  readonly startedAt: string;
  readonly machine: { cpus: number; cpuModel?: string; loadavg: number[]; node: string };
  readonly tools: readonly string[];
  readonly settings: {
    durationS: number;
    warmupS: number;
    rounds: number;
    connections: number;
    scenarios: string[];
    variants: string[];
    generatorCores: number[];
    targetCores: number[];
  };
  readonly postgres: string;
  readonly datasets: readonly DatasetRecord[];
  readonly notes: readonly string[];
  readonly scenarios: readonly ScenarioResult[];
  readonly checks: readonly Check[];
}

const num = (n: number | null | undefined, digits = 2) =>
  typeof n === 'number' && Number.isFinite(n) ? n.toFixed(digits) : '-';
const int = (n: number | null | undefined) =>
  typeof n === 'number' && Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '-';

function ratioNote(result: ScenarioResult): string {
  const baseline = result.targets.find((t) => t.kind === 'baseline');
  const [first, second] = result.targets.filter((t) => t.kind === 'service');
  if (baseline !== undefined && first !== undefined) return `${first.name} ${num(first.rps / baseline.rps)}x baseline`;
  if (first !== undefined && second !== undefined)
    return `${second.name} ${num(second.rps / first.rps)}x ${first.name}`;
  return '';
}

export function chartOf(run: RunJson): string {
  const scenarios: ChartScenario[] = run.scenarios.map((r) => ({
    id: r.id,
    note: ratioNote(r),
    targets: r.targets.map((t) => ({ name: t.kind === 'ceiling' ? 'ceiling' : t.name, rps: t.rps, p99Ms: t.p99Ms })),
  }));
  const s = run.settings;
  const subtitle =
    `${run.startedAt.slice(0, 16).replace('T', ' ')} UTC; wrk ${s.connections} connections, ${s.rounds} round(s) of ${s.durationS} s; ` +
    `wrk on core(s) ${s.generatorCores.join(',') || '-'}, servers on core(s) ${s.targetCores.join(',') || '-'}; ${run.machine.cpus} CPUs`;
  return renderChart('UrlShortener bench: req/s and p99 per target and scenario', subtitle, scenarios);
}

function targetLine(r: ScenarioResult, t: TargetResult): string {
  const baseline = comparedBaseline(t, r);
  const ceiling = r.targets.find((x) => x.kind === 'ceiling');
  const cells = [
    r.id,
    t.kind === 'ceiling' ? `ceiling (${r.ceilingServer})` : t.name,
    int(t.rps),
    num(t.p50Ms),
    num(t.p99Ms),
    cpuText(t, (n) => num(n, 1)),
    baseline ? num(t.rps / baseline.rps) : '',
    baseline ? num(t.p99Ms / baseline.p99Ms) : '',
    ceiling !== undefined && t !== ceiling ? `${num((t.rps / ceiling.rps) * 100, 0)}%` : '',
    t.rssBytes == null ? '-' : num(t.rssBytes / 2 ** 20, 0),
    int(t.unexpected),
  ];
  return `| ${cells.join(' | ')} |`;
}

function checkLine(c: Check): string {
  const percent = c.measure.endsWith('cost');
  const show = (v: number) => (percent ? `${num(v * 100, 1)}%` : num(v));
  const spread = c.spread === undefined ? '' : ` (${show(c.spread[0])}–${show(c.spread[1])})`;
  return `| ${c.verdict} | ${c.scenario} | ${c.target} | ${c.measure} | ${show(c.value)}${spread} | ${c.op} ${show(c.limit)} | ${(c.note ?? '').replace(/\|/g, '/')} |`;
}

export function sectionOf(run: RunJson, chartPath: string): string {
  const s = run.settings;
  const filtered =
    [...s.scenarios, ...s.variants].length > 0
      ? ` (filtered: scenarios ${s.scenarios.join(',') || 'all'}, variants ${s.variants.join(',') || 'all'})`
      : '';
  const lines = [
    START,
    '',
    `Latest run: ${run.startedAt} on ${run.machine.cpus} × ${run.machine.cpuModel ?? 'CPU'}, Node ${run.machine.node}, load average ${run.machine.loadavg.map((l) => l.toFixed(2)).join(' ')} at the end${filtered}.`,
    `${s.rounds} round(s) of ${s.durationS} s per target after ${s.warmupS} s of warm-up, ${s.connections} connections; wrk on core(s) ${s.generatorCores.join(',') || '-'}, every server on core(s) ${s.targetCores.join(',') || '-'}. ${run.tools.join('; ')}. PostgreSQL: ${run.postgres}.`,
    '',
    ...run.notes.map((n) => `- ${n}`),
    ...run.datasets.map(
      (d) =>
        `- ${d.backend}, ${int(d.mappings)} mappings: ${d.loadSeconds === null ? 'reused from an earlier run' : `loaded in ${num(d.loadSeconds, 1)} s${d.loadPhases ? ` (${phaseList(d.loadPhases)})` : ''}`}`,
    ),
    '',
    `![req/s and p99 per target and scenario](${chartPath})`,
    '',
    '| scenario | target | req/s | p50 ms | p99 ms | CPU µs/req | × baseline | p99 × baseline | % of ceiling | RSS MiB | unexpected |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...run.scenarios.flatMap((r) => r.targets.map((t) => targetLine(r, t))),
    '',
    '| verdict | scenario | target | measure | value (rounds: lowest–highest) | budget | note |',
    '| --- | --- | --- | --- | ---: | --- | --- |',
    ...run.checks.map(checkLine),
    '',
    END,
  ];
  return lines.join('\n');
}

/** Writes the chart beside `jsonFile` and, when `readme`, the README section; returns what it wrote. */
export function writeResultsDocs(jsonFile: string, options: { readme: boolean }): string[] {
  const run = JSON.parse(readFileSync(jsonFile, 'utf8')) as RunJson;
  const svg = join(dirname(jsonFile), 'latest.svg');
  writeFileSync(svg, chartOf(run));
  const written = [`results written to ${jsonFile}`, `chart written to ${svg}`];
  if (!options.readme) {
    return [
      ...written,
      'bench/README.md not updated (a filtered run); `node --import tsx bench/readme.ts` writes it from latest.json',
    ];
  }
  const readme = readFileSync(README, 'utf8');
  const from = readme.indexOf(START);
  const to = readme.indexOf(END);
  const section = sectionOf(run, relative(dirname(README), svg));
  const next =
    from >= 0 && to > from
      ? readme.slice(0, from) + section + readme.slice(to + END.length)
      : `${readme.trimEnd()}\n\n## Latest results\n\n${section}\n`;
  writeFileSync(README, next);
  return [...written, `results section of ${README} updated`];
}
