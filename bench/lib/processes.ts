import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { SETTINGS } from '../../src/config/config.js';
import { registerCleanup } from './cleanup.js';

/** The repository root: children run from here. */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const HOST = '127.0.0.1';

const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;
const KEPT_OUTPUT_LINES = 20;

/** Output a child wrote (stdout and stderr): how many lines, and the last few. */
export interface OutputLog {
  lines: number;
  readonly tail: string[];
}

/** A server running in a child process. */
export interface ChildServer {
  readonly name: string;
  readonly pid: number;
  readonly baseUrl: string;
  /** The `application_name` of its PostgreSQL connections (`PGAPPNAME`, which node-postgres reads). */
  readonly applicationName: string;
  readonly output: OutputLog;
  /** Resident memory (VmRSS) now, in bytes; undefined once the process is gone. */
  rssBytes(): number | undefined;
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
// Last resort when the bench exits without cleaning up (e.g. process.exit from elsewhere).
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/**
 * Stops (`SIGSTOP`) or continues (`SIGCONT`) a process and all its descendants. The bench keeps
 * every target but the one it measures stopped: targets over one shared database (the PostgreSQL
 * datasets of 10,000,000 mappings) otherwise did each other's work between their own runs, an
 * idle service's merge every 5 s taking the journal rows of the one under load and its click
 * compaction every 60 s folding that one's clicks, on the measured target's core, and a target's
 * timers fired in another's run (in one A/B the baseline, which never touches the database, showed
 * 8.5 and 11.7 µs of PostgreSQL's CPU a request in a round; bench/PROFILE.md). A stopped process's
 * timers fire when it continues, before its run (`StoppedBetweenRuns.during` waits for them).
 */
export function signalTree(pid: number, signal: 'SIGSTOP' | 'SIGCONT'): void {
  for (const member of processTree(pid)) {
    try {
      process.kill(member, signal);
    } catch {
      // Gone meanwhile.
    }
  }
}

/** A target to keep stopped between its runs. */
export interface StoppableTarget {
  readonly pid: number;
  /**
   * How many database transactions the target has open now (undefined: it has no database that
   * other targets share locks in). A target is stopped only with none open: one stopped inside a
   * transaction holds its locks while it is stopped, and the next target's writes wait for them.
   */
  openTransactions?(): Promise<number>;
}

/** How long a target is given to reach a moment between its transactions before it is stopped anyway. */
const BETWEEN_TRANSACTIONS_TIMEOUT_MS = 10_000;

/** Targets stopped between their runs (`signalTree`): each continues only for its own. */
export interface StoppedBetweenRuns {
  /** Continues `pid`'s tree, waits until it is idle again (`settle`), runs `work`, then stops it again. */
  during<T>(pid: number, work: () => Promise<T>): Promise<T>;
  /** Continues every tree (before the targets are read or stopped for good; also at clean-up). */
  release(): Promise<void>;
  /** Stops that could not wait for a moment between the target's transactions (see `StoppableTarget`). */
  readonly warnings: string[];
}

/**
 * Stops every target (`signalTree`), each at a moment it has no database transaction open: it is
 * stopped, asked about, and continued for a few milliseconds when it has one, until it has none.
 * Targets over one PostgreSQL database share its locks (advisory locks across schemas, the event
 * log's partition counters within one): in the first full bench with the stops, a target stopped
 * while its batch of creates held the partition counters, the next target's batch waited for them
 * through its whole run and was granted them just before it was stopped in turn, and so on: every
 * target of `postgres-shorten-10m` answered nothing in any round (bench/PROFILE.md).
 */
export async function stopBetweenRuns(
  targets: readonly (number | StoppableTarget)[],
  timeoutMs = BETWEEN_TRANSACTIONS_TIMEOUT_MS,
): Promise<StoppedBetweenRuns> {
  const all = targets.map((target) => (typeof target === 'number' ? { pid: target } : target));
  const warnings: string[] = [];
  const continueAll = async () => {
    for (const { pid } of all) signalTree(pid, 'SIGCONT');
  };
  const release = registerCleanup(continueAll);
  const stop = async (target: StoppableTarget) => {
    const started = performance.now();
    for (;;) {
      signalTree(target.pid, 'SIGSTOP');
      const open = (await target.openTransactions?.()) ?? 0;
      if (open === 0) return;
      if (performance.now() - started > timeoutMs) {
        warnings.push(
          `pid ${target.pid} stopped with ${open} transaction(s) open after ${timeoutMs / 1000} s of trying`,
        );
        return;
      }
      signalTree(target.pid, 'SIGCONT');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  };
  try {
    for (const target of all) await stop(target);
  } catch (error) {
    await release();
    throw error;
  }
  return {
    async during(pid, work) {
      const target = all.find((t) => t.pid === pid) ?? { pid };
      signalTree(pid, 'SIGCONT');
      try {
        // What fell due while it was stopped (its timers, V8's delayed tasks such as a memory
        // reducer's collection) runs at once when it continues: done before its run, as it would
        // have been while it idled had it not been stopped (bench/PROFILE.md).
        await settle([pid]);
        return await work();
      } finally {
        await stop(target);
      }
    },
    release,
    warnings,
  };
}

/** The process and all its descendants (a service with worker processes is a tree). */
export function processTree(pid: number): number[] {
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${tree[i]}/task`);
    } catch {
      continue;
    }
    for (const task of tasks) {
      try {
        const children = readFileSync(`/proc/${tree[i]}/task/${task}/children`, 'utf8').trim();
        if (children !== '') tree.push(...children.split(' ').map(Number));
      } catch {
        // The task ended meanwhile.
      }
    }
  }
  return tree;
}

/**
 * CPU seconds (user + system, all threads) the process and its live descendants have used, and
 * its children that ended (their time is the process's children's once reaped), from /proc.
 * Without the reaped children's time the sum would fall when a child ends (a PostgreSQL backend
 * whose connection closed).
 */
export function cpuSeconds(pid: number): number {
  let ticks = 0;
  for (const member of processTree(pid)) {
    try {
      const fields = readFileSync(`/proc/${member}/stat`, 'utf8').split(') ')[1]!.split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
      if (member === pid) ticks += Number(fields[13]) + Number(fields[14]);
    } catch {
      // Gone meanwhile: a child's time reaches its parent's once reaped.
    }
  }
  return ticks / 100;
}

/** A process (tree) at most this busy, as a share of a core, over SETTLE_WINDOW_S counts as idle. */
const IDLE_SHARE = 0.05;
/** Long enough for /proc's 10 ms ticks to tell 5% from an idle service's 1–4%. */
const SETTLE_WINDOW_S = 0.5;

/**
 * Waits until every process is idle (each under 5% of a core over half a second), or `maxMs`:
 * a service keeps working a moment after its load stops (the last click and visit flushes, the
 * fold, consumers catching up, a checkpoint), and that work must not land in the next target's
 * measurement. Each process is judged on its own: an idle service still wakes for its timers
 * (about 1–4% of a core), so with a few of them a bound on their sum was never met and every wait
 * ran to `maxMs`. Returns how long it took.
 */
export async function settle(pids: readonly number[], maxMs = 5000): Promise<number> {
  const started = performance.now();
  const used = () => pids.map((pid) => cpuSeconds(pid));
  for (;;) {
    const before = used();
    await new Promise((resolve) => setTimeout(resolve, SETTLE_WINDOW_S * 1000));
    const busiest = Math.max(0, ...used().map((seconds, i) => (seconds - before[i]!) / SETTLE_WINDOW_S));
    const waited = performance.now() - started;
    if (busiest < IDLE_SHARE || waited >= maxMs) return waited;
  }
}

/**
 * The bench's environment without the service's own settings (so a stray CACHE_TTL_MS in the
 * caller's shell cannot skew a run), plus `extra`.
 */
export function childEnv(extra: Readonly<Record<string, string>>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const setting of Object.values(SETTINGS)) delete env[setting.name];
  return { ...env, ...extra };
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, HOST, () => {
      const address = probe.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

function captureOutput(child: ChildProcess): OutputLog {
  const log: OutputLog = { lines: 0, tail: [] };
  const onText = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (line.trim() === '') continue;
      log.lines++;
      log.tail.push(line.length > 500 ? `${line.slice(0, 500)}...` : line);
      if (log.tail.length > KEPT_OUTPUT_LINES) log.tail.shift();
    }
  };
  child.stdout?.on('data', onText);
  child.stderr?.on('data', onText);
  return log;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** SIGTERM, then SIGKILL if the process has not exited after STOP_TIMEOUT_MS. */
async function terminate(child: ChildProcess): Promise<void> {
  const gone = exited(child);
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
  await gone;
  clearTimeout(timer);
  live.delete(child);
}

/** A command to run, optionally pinned to `cores` with taskset (which execs it: same pid). */
export interface Command {
  readonly command: string;
  readonly args: readonly string[];
  readonly cores?: readonly number[];
}

export const node = (args: readonly string[], cores?: readonly number[]): Command => ({
  command: process.execPath,
  args,
  cores,
});

function pinnedArgv({ command, args, cores }: Command): [string, string[]] {
  return cores === undefined || cores.length === 0
    ? [command, [...args]]
    : ['taskset', ['-c', cores.join(','), command, ...args]];
}

/** Starts `command` from the repository root; it is stopped at clean-up if not before. */
function startCommand(command: Command, env: NodeJS.ProcessEnv) {
  const [file, argv] = pinnedArgv(command);
  const child = spawn(file, argv, { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  live.add(child);
  const output = captureOutput(child);
  const stop = registerCleanup(() => terminate(child));
  return { child, output, stop };
}

function describeExit(child: ChildProcess, output: OutputLog): string {
  const status = child.exitCode !== null ? `exit code ${child.exitCode}` : `signal ${child.signalCode}`;
  return `${status}; last output:\n${output.tail.join('\n')}`;
}

/**
 * Runs `node <args>` to completion; rejects with its output when it fails. `signal` stops it
 * early (SIGTERM, then SIGKILL), and it then rejects with the signal's reason.
 */
export async function runNode(
  args: readonly string[],
  env: Readonly<Record<string, string>>,
  signal?: AbortSignal,
): Promise<void> {
  signal?.throwIfAborted();
  const { child, output, stop } = startCommand(node(args), childEnv(env));
  const onAbort = () => void stop();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await exited(child);
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
  await stop();
  signal?.throwIfAborted();
  if (child.exitCode !== 0) throw new Error(`node ${args.join(' ')} failed: ${describeExit(child, output)}`);
}

async function healthy(baseUrl: string): Promise<boolean> {
  try {
    const response = await fetch(`${baseUrl}/health`, { signal: AbortSignal.timeout(2_000) });
    await response.body?.cancel();
    return response.status === 200;
  } catch {
    return false;
  }
}

async function waitUntilReady(name: string, baseUrl: string, child: ChildProcess, output: OutputLog): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!(await healthy(baseUrl))) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${name} exited before it was ready: ${describeExit(child, output)}`);
    }
    if (Date.now() > deadline) throw new Error(`${name} was not ready after ${READY_TIMEOUT_MS / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Resident memory of the process and its descendants; undefined when it is gone. */
function residentBytes(pid: number): number | undefined {
  let total: number | undefined;
  for (const member of processTree(pid)) {
    try {
      const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${member}/status`, 'utf8'));
      if (match) total = (total ?? 0) + Number(match[1]) * 1024;
    } catch {
      // Gone meanwhile.
    }
  }
  return total;
}

/**
 * Starts a server (`command` with PORT and HOST set, or listening on `port` by its own
 * configuration) and waits until `GET /health` answers 200. The caller stops it; an interrupted
 * bench stops it at clean-up.
 */
export async function startServer(
  name: string,
  command: Command,
  env: Readonly<Record<string, string>>,
  port?: number,
): Promise<ChildServer> {
  const listenPort = port ?? (await freePort());
  const baseUrl = `http://${HOST}:${listenPort}`;
  const applicationName = `urlshortener-bench-${listenPort}`;
  const { child, output, stop } = startCommand(
    command,
    childEnv({ ...env, HOST, PORT: String(listenPort), PGAPPNAME: applicationName }),
  );
  try {
    await waitUntilReady(name, baseUrl, child, output);
  } catch (error) {
    await stop();
    throw error;
  }
  const pid = child.pid!;
  return { name, pid, baseUrl, applicationName, output, rssBytes: () => residentBytes(pid), stop };
}
