/**
 * `node --import tsx bench/perf-summary.ts PERF_SCRIPT.txt REQUESTS [TOP]`: a process's CPU a
 * request by what it was doing, from a `perf record -g` of all its threads, the kernel's part
 * included, which a `--cpu-prof` profile (bench/profile-summary.ts) cannot show: the socket
 * writes and reads, SQLite's page reads, the checkpointer's thread, V8's helper threads. Start
 * the target with `--perf-basic-prof-only-functions` (JavaScript frames named), then:
 *
 *   perf record -F 999 -g -p PID -o /tmp/p.data -- sleep 10          # under load (wrk)
 *   perf script -i /tmp/p.data -F comm,pid,tid,ip,sym > /tmp/p.txt
 *   node --import tsx bench/perf-summary.ts /tmp/p.txt $((RPS * 10))
 *
 * (REQUESTS: those answered during the recording.) Each sample (one per 1/999 s of a thread on a
 * core) goes to the first of these its stack matches: a SQLite statement (by method, with the
 * nearest JavaScript frame that ran it, and whether another thread ran it), another thread than
 * the main one (V8's or not), the socket write, the garbage collector, what runs under the HTTP
 * parser's call (a GET's whole handling, a POST's up to its body), the socket read, other
 * JavaScript (a body's end and what follows it, timers, promises), anything else. For looking at
 * where the time goes, never in a test; bench/PROFILE.md has what it showed.
 */
import { readFileSync } from 'node:fs';

const HZ = 999;

interface Sample {
  /** Whether the main thread took it (its thread id is the process id). */
  readonly main: boolean;
  /** Symbol names as perf prints them, leaf first. */
  readonly frames: readonly string[];
}

function samples(text: string): Sample[] {
  return text
    .split(/\n\s*\n/)
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const [header = '', ...lines] = block.split('\n').filter((line) => line.trim() !== '');
      const ids = /\s(\d+)\/(\d+)\s*$/.exec(header);
      if (!ids) throw new Error(`no pid/tid in "${header}": run perf script with -F comm,pid,tid,ip,sym`);
      const frames = lines.map((line) =>
        line
          .trim()
          .replace(/^[0-9a-f]+\s+/, '')
          .replace(/\s+\([^)]*\)$/, ''),
      );
      return { main: ids[1] === ids[2], frames };
    })
    .filter((sample) => sample.frames.length > 0);
}

const has = (frames: readonly string[], ...parts: string[]) => frames.some((f) => parts.some((p) => f.includes(p)));

/** The category of a sample, and for a statement the JavaScript that ran it. */
function categorize({ main, frames }: Sample): [category: string, detail?: string] {
  const statement = frames.findIndex((f) => /Statement::JS_(get|all|run|iterate)|Database::JS_(exec|prepare)/.test(f));
  if (statement >= 0) {
    const method = /::JS_(\w+)/.exec(frames[statement]!)![1];
    const caller = frames.slice(statement + 1).find((f) => f.startsWith('JS:')) ?? '(no JavaScript frame)';
    return [`${main ? '' : 'other thread: '}SQLite ${method}`, caller];
  }
  if (!main)
    return [has(frames, 'v8::internal::') ? 'other threads: V8 (garbage collection, compiling)' : 'other threads'];
  if (has(frames, 'WriteString', 'DoTryWrite', 'Writev', 'WriteBuffer')) return ['socket write (kernel included)'];
  if (has(frames, 'Heap::', 'Scavenge', 'MarkCompact', 'GCTracer')) return ['garbage collection (main thread)'];
  if (has(frames, 'llhttp', 'parserOn')) return ['under the HTTP parser (a GET to its answer, a POST to its body)'];
  if (has(frames, 'uv__read')) return ['socket read (kernel included)'];
  const js = frames.find((f) => f.startsWith('JS:'));
  if (js) return ['other JavaScript (after a body, timers, promises)', js];
  return ['other (main thread)', frames[0]];
}

function main(): void {
  const [file, requestsArg, topArg] = process.argv.slice(2);
  const requests = Number(requestsArg);
  if (!file || !(requests > 0)) {
    console.error('usage: node --import tsx bench/perf-summary.ts PERF_SCRIPT.txt REQUESTS [TOP]');
    process.exit(64);
  }
  const all = samples(readFileSync(file, 'utf8'));
  const byCategory = new Map<string, number>();
  const byDetail = new Map<string, number>();
  const count = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
  for (const sample of all) {
    const [category, detail] = categorize(sample);
    count(byCategory, category);
    if (detail !== undefined) count(byDetail, `${category}  ${detail}`);
  }
  const us = (n: number) => ((n / HZ / requests) * 1e6).toFixed(2).padStart(7);
  /** The rows of `counts`, most samples first: µs a request, share of all samples, name. */
  const print = (counts: Map<string, number>, top = counts.size) => {
    for (const [name, n] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, top)) {
      console.log(`${us(n)} µs  ${((100 * n) / all.length).toFixed(1).padStart(5)} %  ${name}`);
    }
  };
  console.log(`${all.length} samples, ${us(all.length)} µs a request in all (${requests} requests)`);
  print(byCategory);
  console.log('\nby the JavaScript that ran it:');
  print(byDetail, Number(topArg ?? 15));
}

main();
