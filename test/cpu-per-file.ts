/**
 * With `TEST_CPU_LOG=FILE` (vitest.config.ts adds this setup file then), each test file appends
 * one JSON line to FILE when it ends: its wall time and the CPU seconds of the test process that
 * ran it, its own (`self`) and that of the child processes it started and saw exit (`children`:
 * the service processes, the browser, the CLI runs; Linux counts a child's CPU to its parent once
 * the parent has reaped it). PostgreSQL's, Redis's and NATS's own CPU is not in it. Where CI's
 * time goes, file by file: `node scripts/test-cpu-summary.mjs FILE`.
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { afterAll, beforeAll } from 'vitest';

const LOG = process.env.TEST_CPU_LOG;
/** CPU seconds of this process and of its reaped children, from /proc/self/stat (Linux). */
function cpu(): { self: number; children: number } {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  // Fields 14 to 17 of proc(5), counted from the state (field 3) here: utime, stime, cutime, cstime, in clock ticks (100 a second).
  return { self: (f[11]! + f[12]!) / 100, children: (f[13]! + f[14]!) / 100 };
}

let start: { at: number; cpu: ReturnType<typeof cpu>; file: string } | undefined;
// eslint-disable-next-line no-empty-pattern -- vitest hands the suite as the second argument and requires the first to be destructured
beforeAll(({}, suite) => {
  start = { at: performance.now(), cpu: cpu(), file: relative(process.cwd(), suite.file.filepath) };
});
afterAll(() => {
  if (!LOG || !start) return;
  const now = cpu();
  const line = {
    file: start.file,
    wall: Number(((performance.now() - start.at) / 1000).toFixed(2)),
    self: Number((now.self - start.cpu.self).toFixed(2)),
    children: Number((now.children - start.cpu.children).toFixed(2)),
  };
  appendFileSync(LOG, `${JSON.stringify(line)}\n`);
});
