/**
 * A preload that takes a sampling heap profile of what a process allocates, including what the
 * collector has already taken (V8's sampling heap profiler with both "include collected" flags),
 * from ALLOC_DELAY_MS (default 5000) after start for ALLOC_DURATION_MS (default 5000), and writes
 * it to ALLOC_OUT (default /tmp/alloc-<pid>-<thread>.heapprofile). Bytes a request by function:
 *
 *   node --import ./bench/alloc-sampler.mjs ... (then load it with wrk for those seconds)
 *   node bench/alloc-sampler.mjs FILE.heapprofile REQUESTS [TOP]
 *
 * REQUESTS: the requests answered within the window (wrk's count, if it ran just that long).
 *
 * ALLOC_PROMOTED=true leaves out what young collections took: what is left is what outlived the
 * young generation into the old one (and what was still young at the end), whose full collections
 * set the redirect's p99 on one core (bench/PROFILE.md, "What the old generation is filled with").
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { threadId } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';

function sample() {
  const out = process.env.ALLOC_OUT || `/tmp/alloc-${process.pid}-${threadId}.heapprofile`;
  const delayMs = Number(process.env.ALLOC_DELAY_MS ?? 5000);
  const durationMs = Number(process.env.ALLOC_DURATION_MS ?? 5000);
  const session = new Session();
  session.connect();
  const options = {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: process.env.ALLOC_PROMOTED !== 'true',
  };
  setTimeout(() => {
    session.post('HeapProfiler.startSampling', options, () => {
      setTimeout(() => {
        session.post('HeapProfiler.stopSampling', (error, result) => {
          if (!error) writeFileSync(out, JSON.stringify(result.profile));
        });
      }, durationMs).unref();
    });
  }, delayMs).unref();
}

function summarize(file, requests, top) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const bySite = new Map();
  let total = 0;
  const walk = (node) => {
    const { functionName, url, lineNumber } = node.callFrame;
    const site = `${functionName || '(anonymous)'} ${url.replace(/^.*\//, '')}:${lineNumber + 1}`;
    total += node.selfSize;
    if (node.selfSize > 0) bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
    node.children.forEach(walk);
  };
  walk(profile.head);
  console.log(`${Math.round(total / requests)} bytes a request in all`);
  for (const [site, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`${String(Math.round(bytes / requests)).padStart(7)}  ${site}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  summarize(process.argv[2], Number(process.argv[3] ?? 1), Number(process.argv[4] ?? 30));
} else {
  sample();
}
