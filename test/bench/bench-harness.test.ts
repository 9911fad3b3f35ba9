/**
 * The bench's own logic, without running any load: what it reads from wrk, how it judges a
 * budget (GENERATOR-BOUND, INVALID, PASS, FAIL), which scenarios a filter selects, and that its
 * generated codes and chart are what the rest relies on.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderChart } from '../../bench/lib/chart.js';
import { baselineTwins, evaluate, GENERATOR_BOUND_FRACTION } from '../../bench/lib/checks.js';
import { createdPrefix, seedCodeOfKey, seedKeysSorted, seedMapping, shortenTag } from '../../bench/lib/codes.js';
import {
  allScenarios,
  rotated,
  type ScenarioResult,
  selectScenarios,
  type TargetResult,
} from '../../bench/lib/scenarios.js';
import { SERVICE_ARGS } from '../../bench/lib/targets.js';
import type { Measurement } from '../../bench/lib/wrk.js';
import { SERVICE_VARIANTS } from '../../bench/lib/variants.js';
import { parseWrkOutput, wrkArgv } from '../../bench/lib/wrk.js';
import { sampleProblems } from '../../bench/lib/workloads.js';

const wrkLine = (fields: Record<string, unknown>) =>
  `Running 2s test @ http://127.0.0.1:1\nRequests/sec: 1\nBENCH_WRK_JSON ${JSON.stringify({
    requests: 20_000,
    duration_us: 2_000_000,
    bytes: 1,
    errors: { connect: 0, read: 0, write: 0, status: 0, timeout: 0 },
    latency_us: { p50: 1500, p90: 2000, p99: 4200, p999: 9000, max: 12000, mean: 1600 },
    threads: [{ statuses: {}, sample: {} }],
    ...fields,
  })}\n`;

describe('parseWrkOutput', () => {
  it('reads throughput and latency, and counts socket errors and statuses >= 400 as unexpected', () => {
    const m = parseWrkOutput(wrkLine({ errors: { connect: 1, read: 2, write: 0, status: 7, timeout: 3 } }), 302);
    expect(m.rps).toBe(10_000);
    expect(m.p50Ms).toBe(1.5);
    expect(m.p99Ms).toBe(4.2);
    expect(m.unexpected).toBe(13);
  });

  it('uses exact status counts when the run kept them, so a 200 instead of a 302 is unexpected too', () => {
    const m = parseWrkOutput(
      wrkLine({ threads: [{ statuses: { 302: 900, 200: 5 } }, { statuses: { 302: 95 } }] }),
      302,
    );
    expect(m.statuses).toEqual({ 302: 995, 200: 5 });
    expect(m.unexpected).toBe(5);
  });

  it('refuses output without the script line', () => {
    expect(() => parseWrkOutput('unable to connect to 127.0.0.1:1 Connection refused', 302)).toThrow(/BENCH_WRK_JSON/);
  });
});

describe('wrkArgv', () => {
  it('pins wrk with taskset and gives it one thread per core', () => {
    const argv = wrkArgv({
      url: 'http://127.0.0.1:9',
      script: 'popular.lua',
      args: ['/tmp/paths'],
      durationS: 2,
      connections: 64,
      cores: [0],
      countStatuses: false,
      expectedStatus: 302,
    });
    expect(argv.slice(0, 5)).toEqual(['taskset', '-c', '0', 'wrk', '-t1']);
    expect(argv.slice(-2)).toEqual(['http://127.0.0.1:9', '/tmp/paths']);
  });
});

function target(name: string, kind: TargetResult['kind'], rps: number, p99Ms = 2, unexpected = 0): TargetResult {
  return {
    name,
    kind,
    pid: 1,
    warmup: undefined,
    rounds: [],
    rps,
    p50Ms: 1,
    p99Ms,
    cpuUsPerRequest: 10,
    unexpected,
    statuses: {},
    problems: [],
    rssBytes: undefined,
    outputLines: 0,
    outputTail: [],
  };
}

function scenario(
  kind: 'redirect' | 'shorten',
  targets: TargetResult[],
  backend: 'sqlite' | 'postgres' = 'sqlite',
): ScenarioResult {
  return {
    id: `${backend}-${kind}-1k`,
    group: 'main',
    backend,
    workload: kind === 'redirect' ? 'popular' : 'shorten',
    kind,
    mappings: 1000,
    description: '',
    connections: 64,
    ceilingServer: 'nginx',
    targets,
  };
}

describe('the service as the bench starts it', () => {
  it("runs npm start's node arguments, V8's settings included", () => {
    const { scripts } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      scripts: { start: string };
    };
    expect(`exec node ${SERVICE_ARGS.join(' ')}`).toBe(scripts.start);
    expect(SERVICE_ARGS).toEqual(expect.arrayContaining(['--max-semi-space-size=32', '--heap-growing-percent=100']));
    expect(SERVICE_ARGS.slice(-2)).toEqual(['dist/cli.js', 'serve']);
  });
});

describe('budget verdicts', () => {
  it('passes or fails a ratio when the baseline is well below the ceiling', () => {
    const checks = evaluate(
      [
        scenario('redirect', [
          target('ceiling', 'ceiling', 200_000),
          target('baseline', 'baseline', 80_000),
          target('default', 'service', 76_000, 2.2),
        ]),
      ],
      SERVICE_VARIANTS.slice(0, 1),
    );
    expect(checks.map((c) => [c.measure, c.verdict])).toEqual([
      ['rps / baseline rps', 'PASS'],
      ['p99 / baseline p99', 'PASS'],
    ]);
  });

  it(`marks GENERATOR-BOUND once the baseline reaches ${GENERATOR_BOUND_FRACTION * 100}% of the ceiling`, () => {
    const checks = evaluate(
      [
        scenario('redirect', [
          target('ceiling', 'ceiling', 100_000),
          target('baseline', 'baseline', 86_000),
          target('default', 'service', 40_000),
        ]),
      ],
      SERVICE_VARIANTS.slice(0, 1),
    );
    expect(checks.every((c) => c.verdict === 'GENERATOR-BOUND')).toBe(true);
  });

  it('marks INVALID when a side had errors, whatever the ratio', () => {
    const checks = evaluate(
      [
        scenario('shorten', [
          target('ceiling', 'ceiling', 100_000),
          target('baseline', 'baseline', 20_000),
          target('default', 'service', 15_000, 2, 3),
        ]),
      ],
      SERVICE_VARIANTS.slice(0, 1),
    );
    expect(checks).toHaveLength(1);
    expect(checks[0]!.verdict).toBe('INVALID');
  });

  describe('a ceiling round below another target of the same round', () => {
    const measured = (rps: number): Measurement => ({
      rps,
      p50Ms: 1,
      p99Ms: 2,
      requests: rps * 5,
      durationS: 5,
      errors: { connect: 0, read: 0, write: 0, status: 0, timeout: 0 },
      unexpected: 0,
      statuses: {},
      sample: [],
    });
    /** Three rounds: the ceiling's as given, the baseline at 80,000 and the service at 76,000 in each. */
    const run = (ceilingRounds: number[]) =>
      evaluate(
        [
          scenario('redirect', [
            { ...target('ceiling', 'ceiling', 200_000), rounds: ceilingRounds.map(measured) },
            { ...target('baseline', 'baseline', 80_000), rounds: [80_000, 80_000, 80_000].map(measured) },
            { ...target('default', 'service', 76_000, 2.2), rounds: [76_000, 76_000, 76_000].map(measured) },
          ]),
        ],
        SERVICE_VARIANTS.slice(0, 1),
      );

    it('in one round of three: the verdict stands, and the check names the round', () => {
      const checks = run([53_002, 200_000, 210_000]);
      expect(checks.map((c) => c.verdict)).toEqual(['PASS', 'PASS']);
      expect(checks[0]!.note).toContain(
        "ceiling disturbed in 1 of 3 rounds (round 1: the ceiling 53,002 req/s, below baseline's 80,000)",
      );
    });

    it('in most rounds: INVALID, there is no ceiling to judge by', () => {
      const checks = run([53_002, 200_000, 79_000]);
      expect(checks.map((c) => c.verdict)).toEqual(['INVALID', 'INVALID']);
      expect(checks[0]!.note).toContain('ceiling disturbed in 2 of 3 rounds');
    });

    it('in no round: no note of it', () => {
      expect(run([200_000, 200_000, 210_000]).map((c) => c.note ?? '')).not.toContainEqual(
        expect.stringContaining('disturbed'),
      );
    });
  });

  describe('two baseline processes, the ratios taken to the first', () => {
    const run = (secondRounds: number[]) => {
      const result = scenario('redirect', [
        measured('ceiling', 'ceiling', [200_000, 200_000, 200_000], [5, 5, 5]),
        measured('baseline', 'baseline', [80_000, 80_000, 80_000], [10, 10, 10]),
        measured('baseline-2', 'baseline', secondRounds, [10, 10, 10]),
        measured('default', 'service', [76_000, 76_000, 76_000], [11, 11, 11]),
      ]);
      return { checks: evaluate([result], SERVICE_VARIANTS.slice(0, 1)), twins: baselineTwins(result) };
    };

    it('agreeing within 10%: the verdicts stand', () => {
      const { checks, twins } = run([78_000, 84_000, 80_400]);
      expect(checks.map((c) => c.verdict)).toEqual(['PASS', 'PASS']);
      expect(checks[0]!.value).toBeCloseTo(0.95, 5);
      expect(twins).toEqual({
        agree: true,
        text: 'baseline-2 = 1.00 x baseline req/s (median of 3 rounds, 0.97-1.05), p99 1.00 x: the two baseline processes agree',
      });
    });

    it('one at 0.70 of the other: every ratio to the baseline INVALID, the note says why', () => {
      const { checks, twins } = run([56_000, 57_600, 55_200]);
      expect(checks.map((c) => c.verdict)).toEqual(['INVALID', 'INVALID']);
      expect(twins?.agree).toBe(false);
      expect(checks[0]!.note).toContain(
        'baseline-2 = 0.70 x baseline req/s (median of 3 rounds, 0.69-0.72), p99 1.00 x: the two baseline processes disagree by more than 10%',
      );
    });

    it('a run with one baseline has no such check', () => {
      const result = scenario('redirect', [target('ceiling', 'ceiling', 200_000), target('baseline', 'baseline', 1)]);
      expect(baselineTwins(result)).toBeUndefined();
    });
  });

  it('applies each feature budget to its workload: tracing on both, rate limiting on redirects only', () => {
    const targets = [
      target('ceiling', 'ceiling', 200_000),
      target('baseline', 'baseline', 50_000),
      target('default', 'service', 10_000),
      target('tracing', 'service', 8_800),
      target('no-rate-limit', 'service', 10_400),
    ];
    const redirect = evaluate([scenario('redirect', targets)], SERVICE_VARIANTS);
    const shorten = evaluate([scenario('shorten', targets, 'postgres')], SERVICE_VARIANTS);
    const costs = (checks: typeof redirect) =>
      checks.filter((c) => c.measure.endsWith('cost')).map((c) => [c.target, c.verdict]);
    expect(costs(redirect)).toEqual([
      ['tracing', 'FAIL'],
      ['no-rate-limit', 'PASS'],
    ]);
    expect(costs(shorten)).toEqual([['tracing', 'PASS']]);
    expect(shorten.find((c) => c.measure === 'rps / baseline rps')?.limit).toBe(0.25);
  });
});

describe('selectScenarios', () => {
  const all = allScenarios(['sqlite', 'postgres']);

  it('selects by any combination of id parts', () => {
    expect(selectScenarios(all, ['uniform']).map((s) => s.id)).toEqual([
      'sqlite-redirect-uniform-1k',
      'sqlite-redirect-uniform-10m',
      'postgres-redirect-uniform-1k',
      'postgres-redirect-uniform-10m',
    ]);
    expect(selectScenarios(all, ['postgres-shorten-10m']).map((s) => s.id)).toEqual(['postgres-shorten-10m']);
    expect(selectScenarios(all, ['workers']).map((s) => s.id)).toEqual(['sqlite-workers-redirect-popular-1k']);
  });

  it('refuses a filter that matches nothing', () => {
    expect(() => selectScenarios(all, ['mysql'])).toThrow(/match no scenario/);
  });
});

describe('generated codes', () => {
  it('loads seeded codes in ascending order, the same set as seedMapping makes', () => {
    const codes = Array.from(seedKeysSorted(5000), seedCodeOfKey);
    expect([...codes].sort()).toEqual(codes);
    expect(new Set(codes)).toEqual(new Set(Array.from({ length: 5000 }, (_, i) => seedMapping(i).code)));
  });

  it("gives each target's shorten runs codes of their own", () => {
    const tag = shortenTag('B');
    expect(tag).toMatch(/^B[0-9A-Za-z]{3}$/);
    expect(`1${tag}0`.startsWith(createdPrefix('B'))).toBe(true);
  });

  it("checks wrk's uniform draws against seedMapping", () => {
    expect(sampleProblems([`42/${seedMapping(42).code}`])).toEqual([]);
    expect(sampleProblems([`42/${seedMapping(43).code}`])).toHaveLength(1);
  });
});

describe('renderChart', () => {
  it('draws a bar with a title per target and scenario', () => {
    const svg = renderChart('t', 's', [
      {
        id: 'sqlite-redirect-popular-1k',
        note: 'default 0.50x baseline',
        targets: [
          { name: 'baseline', rps: 60_000, p99Ms: 2 },
          { name: 'default', rps: 30_000, p99Ms: 4 },
        ],
      },
    ]);
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg.match(/<rect [^>]*><title>/g)).toHaveLength(4);
    expect(svg).toContain('default 0.50x baseline');
  });

  it("scales to the targets, not to the generator's ceiling, whose bar is cut and labelled", () => {
    const svg = renderChart('t', 's', [
      {
        id: 'sqlite-shorten-1k',
        note: '',
        targets: [
          { name: 'ceiling', rps: 500_000, p99Ms: 1 },
          { name: 'baseline', rps: 20_000, p99Ms: 2 },
          { name: 'default', rps: 8_000, p99Ms: 4 },
        ],
      },
    ]);
    expect(svg).toContain('class="cut"');
    expect(svg).toContain('>500.0k</text>');
    expect(svg).toContain('>8.0k</text>');
    // The axis ends near the baseline's bar (with room for its label), far below the ceiling's.
    expect(svg).toContain('>25k</text>');
    expect(svg).not.toContain('>500k</text>');
  });
});

/** A target measured in rounds with these req/s and CPU µs per request. */
function measured(name: string, kind: TargetResult['kind'], rps: number[], cpuUs: number[]): TargetResult {
  const rounds = rps.map((r) => ({ rps: r, p99Ms: 2 }) as Measurement);
  const sorted = [...rps].sort((a, b) => a - b);
  return { ...target(name, kind, sorted[Math.floor(sorted.length / 2)]!), rounds, cpuUsRounds: cpuUs };
}

describe('rounds', () => {
  it('rotate the order of the targets, so each runs first, in the middle and last in turn', () => {
    const orders = [0, 1, 2, 3].map((round) => rotated(['A', 'B', 'C'], round).join(''));
    expect(orders).toEqual(['ABC', 'BCA', 'CAB', 'ABC']);
    expect(rotated([], 3)).toEqual([]);
  });

  it("judge a budget by the median of each round's own ratio and report their spread", () => {
    const checks = evaluate(
      [
        scenario('redirect', [
          measured('ceiling', 'ceiling', [200_000, 200_000, 200_000], [5, 5, 5]),
          // The machine got busier from round to round; within each round the ratio stays near 0.9.
          measured('baseline', 'baseline', [60_000, 40_000, 20_000], [10, 10, 10]),
          measured('default', 'service', [55_000, 37_000, 17_000], [11, 11, 12]),
          measured('tracing', 'service', [50_000, 35_000, 16_000], [12, 12, 13]),
        ]),
      ],
      SERVICE_VARIANTS.slice(0, 2),
    );
    const rps = checks.find((c) => c.measure === 'rps / baseline rps')!;
    expect(rps.value).toBeCloseTo(55 / 60, 5);
    expect(rps.spread).toEqual([17 / 20, 37 / 40]);
    expect(rps.verdict).toBe('PASS');
    expect(rps.note).toContain('median of 3 rounds');
    expect(rps.note).toContain('CPU/req 1.10x');
    const tracing = checks.find((c) => c.measure.endsWith('cost'))!;
    expect(tracing.value).toBeCloseTo(1 - 16 / 17, 5);
    expect(tracing.spread![0]).toBeCloseTo(1 - 35 / 37, 5);
    expect(tracing.spread![1]).toBeCloseTo(1 - 50 / 55, 5);
  });
});
