/**
 * A preload that records a process's garbage collections (count, total, longest and how many
 * took 1 ms or more, by kind), its event loop's delay (monitorEventLoopDelay, 1 ms resolution)
 * and its heap spaces' sizes, and writes them to GC_PAUSES_OUT (default
 * /tmp/gc-pauses-<pid>-<thread>.json) every 2 s and at exit. For looking at a p99, never in a test:
 *
 *   AB_ENV_paused='AB_FLAGS=--import=./bench/gc-pauses.mjs' AB_VARIANTS=baseline,paused node --import tsx bench/ab.ts
 *
 * (the baseline with it: run bench/baseline-server.ts by hand under `node --import`). Kinds are
 * V8's: 1 scavenge (young generation), 2 minor mark-compact, 4 mark-sweep-compact (old
 * generation), 8 incremental marking, 16 weak callbacks.
 */
import { writeFileSync } from 'node:fs';
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';
import { threadId } from 'node:worker_threads';

const out = process.env.GC_PAUSES_OUT || `/tmp/gc-pauses-${process.pid}-${threadId}.json`;
const started = Date.now();
const kinds = new Map();
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const kind = entry.detail?.kind ?? 0;
    const stats = kinds.get(kind) ?? { n: 0, ms: 0, max: 0, atLeast1ms: 0 };
    stats.n++;
    stats.ms += entry.duration;
    stats.max = Math.max(stats.max, entry.duration);
    if (entry.duration >= 1) stats.atLeast1ms++;
    kinds.set(kind, stats);
  }
}).observe({ entryTypes: ['gc'] });
const delay = monitorEventLoopDelay({ resolution: 1 });
delay.enable();

const ms = (ns) => Math.round(ns / 1e4) / 100;
const mib = (bytes) => Math.round(bytes / 2 ** 16) / 16;
/** Each heap space now: [used, size] in MiB (a new space of 64 MiB is two semi-spaces of 32). */
const heap = () =>
  Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, [mib(s.space_used_size), mib(s.space_size)]]));
function write() {
  const gc = Object.fromEntries([...kinds].map(([kind, s]) => [kind, { ...s, avg: s.ms / s.n }]));
  const loop = { p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), p999: ms(delay.percentile(99.9)) };
  writeFileSync(
    out,
    JSON.stringify({ wallMs: Date.now() - started, gc, loopDelayMs: { ...loop, max: ms(delay.max) }, heapMiB: heap() }),
  );
}
process.on('exit', write);
setInterval(write, 2000).unref();
