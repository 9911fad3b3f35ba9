/**
 * `node --import tsx bench/off-cpu.ts SCHED.txt MAIN_TID [MIN_MS=2]`: when a process's serving
 * thread was off its core, and what ran there instead, from the scheduler's switches on that core.
 * A CPU profile cannot show it (it samples the thread only while it runs), and a p99 is made of it
 * when the thread shares its core: every request in flight waits as long as the gap. Record the
 * target core under load, then print its switches:
 *
 *   perf sched record -C 1 -o /tmp/sched.data -- sleep 4
 *   perf script -i /tmp/sched.data -F time,event,trace > /tmp/sched.txt
 *   node --import tsx bench/off-cpu.ts /tmp/sched.txt <pid of the service> 2
 *
 * Prints the CPU time of each thread on the core, every gap of the main thread of at least MIN_MS
 * (runnable, `R`: preempted; else asleep) with who ran during it, the longest first.
 */
import { readFileSync } from 'node:fs';

const SWITCH =
  /\s(\d+\.\d+):\s+sched:sched_switch:\s+prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)/;

interface Gap {
  readonly ms: number;
  readonly state: string;
  readonly at: number;
  readonly ran: ReadonlyMap<string, number>;
}

function main(): void {
  const [file, mainTid, minText = '2'] = process.argv.slice(2);
  if (file === undefined || mainTid === undefined) throw new Error('usage: off-cpu.ts SCHED.txt MAIN_TID [MIN_MS]');
  const minMs = Number(minText);
  const names = new Map<string, string>();
  const runtime = new Map<string, number>();
  const gaps: Gap[] = [];
  let running: string | undefined;
  let since = 0;
  let out: { at: number; state: string; ran: Map<string, number> } | undefined;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = SWITCH.exec(line);
    if (m === null) continue;
    const [, time, prevComm, prev, prevState, nextComm, next] = m as unknown as string[];
    const t = Number(time);
    names.set(prev!, prevComm!).set(next!, nextComm!);
    if (running !== undefined && since > 0) {
      runtime.set(running, (runtime.get(running) ?? 0) + (t - since));
      if (out !== undefined && running !== mainTid) out.ran.set(running, (out.ran.get(running) ?? 0) + (t - since));
    }
    if (prev === mainTid) out = { at: t, state: prevState!, ran: new Map() };
    if (next === mainTid && out !== undefined) {
      const ms = (t - out.at) * 1000;
      if (ms >= minMs) gaps.push({ ms, state: out.state, at: out.at, ran: out.ran });
      out = undefined;
    }
    running = next;
    since = t;
  }
  const who = (tid: string) => `${names.get(tid) ?? '?'}/${tid}`;
  console.log('CPU time on the core by thread (ms):');
  for (const [tid, s] of [...runtime].sort((a, b) => b[1] - a[1]).slice(0, 15))
    console.log(`  ${who(tid).padEnd(28)} ${(s * 1000).toFixed(1).padStart(9)}`);
  const preempted = gaps.filter((g) => g.state.startsWith('R')).length;
  console.log(`the main thread off the core for ${minMs} ms or more: ${gaps.length} times (${preempted} runnable)`);
  for (const gap of [...gaps].sort((a, b) => b.ms - a.ms).slice(0, 20)) {
    const ran = [...gap.ran].sort((a, b) => b[1] - a[1]).slice(0, 5);
    const list = ran.map(([tid, s]) => `${who(tid)} ${(s * 1000).toFixed(1)}`).join(', ');
    console.log(`  ${gap.ms.toFixed(2).padStart(7)} ms ${gap.state.padEnd(3)} at ${gap.at.toFixed(3)}: ${list}`);
  }
}

main();
