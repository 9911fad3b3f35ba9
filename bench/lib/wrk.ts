/**
 * One wrk run, pinned to the generator's cores, and what it measured. The Lua scripts in
 * bench/wrk/ end with a `done()` that prints one line `BENCH_WRK_JSON {...}`, parsed here.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './processes.js';

export const WRK_DIR = join(ROOT, 'bench', 'wrk');

export interface WrkErrors {
  readonly connect: number;
  readonly read: number;
  readonly write: number;
  readonly timeout: number;
  /** Responses with a status of 400 or more (wrk's "Non-2xx or 3xx responses"). */
  readonly status: number;
}

export interface Measurement {
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly requests: number;
  readonly durationS: number;
  readonly errors: WrkErrors;
  /** Socket errors plus responses with another status than the workload expects. */
  readonly unexpected: number;
  /** Exact counts per status, when the run counted them (warm-ups); otherwise empty. */
  readonly statuses: Readonly<Record<string, number>>;
  /** Each thread's first draws of a generated mix, as "<index>/<code>". */
  readonly sample: readonly string[];
}

export interface WrkRun {
  readonly url: string;
  /** A file of bench/wrk/. */
  readonly script: string;
  readonly args: readonly string[];
  readonly durationS: number;
  readonly connections: number;
  readonly cores: readonly number[];
  /** Count every response's status exactly (a Lua callback per response: slower). */
  readonly countStatuses: boolean;
  readonly expectedStatus: number;
}

interface WrkJson {
  requests: number;
  duration_us: number;
  errors: WrkErrors;
  latency_us: { p50: number; p99: number };
  threads: { statuses: Record<string, number> | unknown[]; sample: string[] | Record<string, never> }[];
}

const MARKER = 'BENCH_WRK_JSON ';

/** The wrk command line of `run` (taskset first when pinned). */
export function wrkArgv(run: WrkRun): string[] {
  const threads = Math.max(1, run.cores.length);
  const wrk = [
    'wrk',
    `-t${threads}`,
    `-c${Math.max(run.connections, threads)}`,
    `-d${run.durationS}s`,
    '--timeout',
    '5s',
    '-s',
    join(WRK_DIR, run.script),
    run.url,
    ...run.args,
  ];
  return run.cores.length > 0 ? ['taskset', '-c', run.cores.join(','), ...wrk] : wrk;
}

function sumStatuses(threads: WrkJson['threads']): Record<string, number> {
  const total: Record<string, number> = {};
  for (const thread of threads) {
    // An empty Lua table encodes as []; a filled one as {"302": n}.
    if (Array.isArray(thread.statuses)) continue;
    for (const [status, count] of Object.entries(thread.statuses)) total[status] = (total[status] ?? 0) + count;
  }
  return total;
}

/** The measurement in wrk's output; throws when the script's JSON line is missing. */
export function parseWrkOutput(stdout: string, expectedStatus: number): Measurement {
  const line = stdout.split('\n').find((l) => l.startsWith(MARKER));
  if (line === undefined) throw new Error(`wrk printed no ${MARKER.trim()} line; its output:\n${stdout.slice(-2000)}`);
  const json = JSON.parse(line.slice(MARKER.length)) as WrkJson;
  const statuses = sumStatuses(json.threads);
  const counted = Object.keys(statuses).length > 0;
  const wrongStatuses = counted
    ? Object.entries(statuses)
        .filter(([status]) => Number(status) !== expectedStatus)
        .reduce((sum, [, count]) => sum + count, 0)
    : json.errors.status;
  const { connect, read, write, timeout } = json.errors;
  const durationS = json.duration_us / 1e6;
  return {
    rps: json.requests / durationS,
    p50Ms: json.latency_us.p50 / 1000,
    p99Ms: json.latency_us.p99 / 1000,
    requests: json.requests,
    durationS,
    errors: json.errors,
    unexpected: connect + read + write + timeout + wrongStatuses,
    statuses,
    sample: json.threads.flatMap((t) => (Array.isArray(t.sample) ? t.sample : [])),
  };
}

/** Runs wrk to completion and parses what it measured. */
export function runWrk(run: WrkRun): Promise<Measurement> {
  const [command, ...args] = wrkArgv(run);
  const env = { ...process.env, BENCH_COUNT_STATUSES: run.countStatuses ? '1' : '0' };
  return new Promise((resolve, reject) => {
    const child = spawn(command!, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) return reject(new Error(`${wrkArgv(run).join(' ')} exited with ${code}: ${stderr}${stdout}`));
      try {
        resolve(parseWrkOutput(stdout, run.expectedStatus));
      } catch (error) {
        reject(error instanceof Error ? new Error(`${error.message}\n${stderr}`) : error);
      }
    });
  });
}
