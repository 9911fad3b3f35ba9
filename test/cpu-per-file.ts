/**
 * With `TEST_CPU_LOG=FILE` (vitest.config.ts adds this setup file then), each test file appends
 * one JSON line to FILE when it ends: its wall time and the CPU seconds of the test process that
 * ran it, its own (`self`) and its child processes' (`children`: the service processes, the
 * browser, the CLI runs, those still running and those that ended; bench/lib/processes.ts's
 * `cpuSeconds`, from /proc). PostgreSQL's, Redis's and NATS's own CPU is not in it. Where CI's
 * time goes, file by file: `node scripts/test-cpu-summary.mjs FILE`.
 */
import { appendFileSync } from 'node:fs';
import { relative } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { cpuSeconds } from '../bench/lib/processes.js';

const LOG = process.env.TEST_CPU_LOG;

/** CPU seconds of this process (every thread) and of the whole tree under it. */
function cpu(): { self: number; tree: number } {
  const { user, system } = process.cpuUsage();
  return { self: (user + system) / 1e6, tree: cpuSeconds(process.pid) };
}

let start: { at: number; cpu: ReturnType<typeof cpu>; file: string } | undefined;
// eslint-disable-next-line no-empty-pattern -- vitest hands the suite as the second argument and requires the first to be destructured
beforeAll(({}, suite) => {
  start = { at: performance.now(), cpu: cpu(), file: relative(process.cwd(), suite.file.filepath) };
});
afterAll(() => {
  if (!LOG || !start) return;
  const now = cpu();
  const self = now.self - start.cpu.self;
  const line = {
    file: start.file,
    wall: Number(((performance.now() - start.at) / 1000).toFixed(2)),
    self: Number(self.toFixed(2)),
    children: Number(Math.max(0, now.tree - start.cpu.tree - self).toFixed(2)),
  };
  appendFileSync(LOG, `${JSON.stringify(line)}\n`);
});
