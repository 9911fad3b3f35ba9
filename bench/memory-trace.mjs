/**
 * A preload that samples the process's memory every 50 ms (V8's heap in use, external memory,
 * and ArrayBuffers' backing stores: typed arrays and Buffers, outside the collected heap) and
 * notes when each full collection began, then writes them to MEMORY_TRACE_OUT (default
 * /tmp/memory-<pid>.json) every 2 s and at exit. For looking at what brings full collections on,
 * never in a test; beside bench/gc-pauses.mjs:
 *
 *   AB_ENV_m='AB_FLAGS=--import=./bench/gc-pauses.mjs --import=./bench/memory-trace.mjs' AB_VARIANTS=default,m node --import tsx bench/ab.ts
 *
 * `samples` are [ms since start, heapUsed, external, arrayBuffers] in MiB (rounded down);
 * `fullCollections` the ms since start at which each mark-compact began.
 */
import { writeFileSync } from 'node:fs';
import { PerformanceObserver } from 'node:perf_hooks';

const out = process.env.MEMORY_TRACE_OUT || `/tmp/memory-${process.pid}.json`;
const start = performance.now();
const samples = [];
const fullCollections = [];
const MARK_COMPACT = 4; // V8's kind, as in bench/gc-pauses.mjs
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if ((entry.detail?.kind ?? 0) === MARK_COMPACT) fullCollections.push(Math.round(entry.startTime - start));
  }
}).observe({ entryTypes: ['gc'] });
setInterval(() => {
  const m = process.memoryUsage();
  samples.push([Math.round(performance.now() - start), m.heapUsed >> 20, m.external >> 20, m.arrayBuffers >> 20]);
}, 50).unref();
const write = () => writeFileSync(out, JSON.stringify({ samples, fullCollections }));
process.on('exit', write);
setInterval(write, 2000).unref();
