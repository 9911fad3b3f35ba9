/**
 * What held a process's event loop in one piece: from a `.cpuprofile` (`node --cpu-prof`,
 * `AB_PROFILE`; a fine interval such as `--cpu-prof-interval 100` µs makes short ones visible),
 * every run of consecutive samples inside one background task of the service, or inside the
 * garbage collector, and how long it lasted. Under load the loop never idles, so a task is
 * found by its stack, not by the gaps around it: the outermost frame of the sample's stack
 * that lies in one of the files below (the visit and click buffers, the journal, the fold, the
 * storage adapters, the event consumers) names it. A request waiting behind such a run waits
 * as long as it, which is what a p99 sees. For looking at a p99, never in a test:
 *
 *   node --import tsx bench/long-tasks.ts /tmp/ab-prof/default/CPU.*.cpuprofile [MIN_MS=2]
 *
 * Prints, per task, how many runs were at least MIN_MS, their total, the longest few, and the
 * profile's length, so that "2 runs of 20 ms in 8 s" can be read against a p99.
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}
interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: readonly number[];
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
  readonly startTime: number;
  readonly endTime: number;
}

/** Files whose frames name a background task (the outermost one in a stack wins). */
const TASK_FILES =
  /\/(visit-[\w-]+|visits|click-buffer|kysely-[\w-]+|batched-creates|group-commit|event-store|cache-invalidation|notifier|executor|periodic-task|batch-writer)\.[jt]s$/;
const GC = '(garbage collector)';

/** The task each node's samples belong to: GC, the outermost frame in TASK_FILES, or none. */
function labels(profile: Profile): Map<number, string | undefined> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const label = new Map<number, string | undefined>();
  const roots = new Set(profile.nodes.map((n) => n.id));
  for (const n of profile.nodes) for (const c of n.children ?? []) roots.delete(c);
  const visit = (id: number, inherited: string | undefined) => {
    const node = byId.get(id)!;
    const { functionName, url } = node.callFrame;
    let own = inherited;
    if (own === undefined && functionName === GC) own = GC;
    if (own === undefined && TASK_FILES.test(url)) own = frameName(node);
    label.set(id, own);
    for (const child of node.children ?? []) visit(child, own);
  };
  for (const root of roots) visit(root, undefined);
  return label;
}

interface Run {
  ms: number;
  /** The functions its samples were in (their own frames), with the ms of each. */
  readonly inside: Map<string, number>;
}

interface Runs {
  count: number;
  totalMs: number;
  longest: Run[];
}

/** A node's own frame, named as in the report: `fn file:line`. */
const frameName = (node: ProfileNode) =>
  `${node.callFrame.functionName || '(anonymous)'} ${node.callFrame.url.split('/').pop()}:${node.callFrame.lineNumber + 1}`;

/** Samples of a loop with nothing to do: a run next to one did not keep a request waiting. */
const IDLE = new Set(['(idle)', '(program)']);

/**
 * Runs of consecutive samples in one task, at least `minMs` long, with requests on both sides
 * (the samples before and after it not idle): while the service is idle, between its loads,
 * its background steps follow each other with nothing in between, and no request waits.
 */
function longTasks(profile: Profile, minMs: number): Map<string, Runs> {
  const label = labels(profile);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const idle = (id: number | undefined) => id === undefined || IDLE.has(byId.get(id)!.callFrame.functionName);
  const runs = new Map<string, Runs>();
  let current: string | undefined;
  let run: Run = { ms: 0, inside: new Map() };
  let before: number | undefined;
  const close = (after: number | undefined) => {
    if (current === undefined || run.ms < minMs || idle(before) || idle(after)) return;
    const r = runs.get(current) ?? { count: 0, totalMs: 0, longest: [] };
    r.count++;
    r.totalMs += run.ms;
    r.longest.push(run);
    runs.set(current, r);
  };
  // timeDeltas[i] is the time from sample i-1 to sample i: the time sample i-1's stack ran.
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    const task = label.get(id);
    const sinceLast = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    if (task !== current) {
      close(id);
      before = profile.samples[i - 1];
      current = task;
      run = { ms: 0, inside: new Map() };
    }
    const self = frameName(byId.get(id)!);
    run.inside.set(self, (run.inside.get(self) ?? 0) + sinceLast);
    run.ms += sinceLast;
  }
  close(undefined);
  return runs;
}

function main(): void {
  const [file, min] = process.argv.slice(2);
  if (file === undefined) throw new Error('usage: bench/long-tasks.ts FILE.cpuprofile [MIN_MS]');
  const minMs = Number(min ?? 2);
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const seconds = (profile.endTime - profile.startTime) / 1e6;
  console.log(`${file}: ${seconds.toFixed(1)} s profiled; runs of one task of at least ${minMs} ms:`);
  const sorted = [...longTasks(profile, minMs)].sort((a, b) => b[1].totalMs - a[1].totalMs);
  for (const [task, r] of sorted) {
    const longest = r.longest.sort((a, b) => b.ms - a.ms);
    const top = longest.slice(0, 5).map((run) => run.ms.toFixed(1));
    console.log(`  ${r.count} runs, ${r.totalMs.toFixed(0)} ms in all, longest ${top.join(', ')} ms: ${task}`);
    // Where the longest run's time went, by the function each sample was in.
    const inside = [...longest[0]!.inside].sort((a, b) => b[1] - a[1]).slice(0, 4);
    console.log(`      the longest in: ${inside.map(([name, ms]) => `${name} ${ms.toFixed(1)}`).join('; ')}`);
  }
}

main();
