import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { stopBetweenRuns } from '../../bench/lib/processes.js';

/** A process's state letter from /proc (`T`: stopped). */
function stateOf(pid: number): string {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[0]!;
}

/** The states of `pids` once none is still changing to what `wanted` says (a signal takes effect a moment later). */
async function statesOf(pids: readonly number[], wanted: (states: string[]) => boolean): Promise<string[]> {
  let states = pids.map(stateOf);
  for (let tries = 0; !wanted(states) && tries < 100; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    states = pids.map(stateOf);
  }
  return states;
}

const allStopped = (states: string[]) => states.every((state) => state === 'T');

/** A parent node process with a child of its own, both ticking: a target with a worker. */
function startTree(): { parent: ChildProcess; child: () => number } {
  const parent = spawn(
    process.execPath,
    [
      '-e',
      `const c = require('node:child_process').spawn(process.execPath, ['-e', 'setInterval(() => {}, 5)'], { stdio: 'ignore' });
       console.log(c.pid); setInterval(() => {}, 5); process.on('SIGTERM', () => { c.kill(); process.exit(0); });`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let childPid = 0;
  parent.stdout!.on('data', (chunk: Buffer) => (childPid = Number(chunk.toString().trim())));
  return { parent, child: () => childPid };
}

describe('the bench keeps every target but the one it measures stopped', () => {
  const started: ChildProcess[] = [];
  afterEach(() => {
    for (const process of started) process.kill('SIGKILL');
  });

  it('stops each tree whole, continues one for its turn, and all of them at the end', async () => {
    const a = startTree();
    const b = startTree();
    started.push(a.parent, b.parent);
    for (let tries = 0; (a.child() === 0 || b.child() === 0) && tries < 100; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const [aPid, bPid] = [a.parent.pid!, b.parent.pid!];
    const stopped = stopBetweenRuns([aPid, bPid]);
    try {
      const all = [aPid, a.child(), bPid, b.child()];
      expect(await statesOf(all, allStopped)).toEqual(['T', 'T', 'T', 'T']);
      const during = await stopped.during(aPid, () =>
        statesOf(all, (states) => states[0] !== 'T' && states[1] !== 'T'),
      );
      expect(during.slice(0, 2).every((state) => state !== 'T')).toBe(true);
      expect(during.slice(2)).toEqual(['T', 'T']);
      // Stopped again once its turn is over, even when its work failed.
      await expect(stopped.during(bPid, () => Promise.reject(new Error('run failed')))).rejects.toThrow('run failed');
      expect(await statesOf(all, allStopped)).toEqual(['T', 'T', 'T', 'T']);
    } finally {
      await stopped.release();
    }
    const released = await statesOf([aPid, a.child(), bPid, b.child()], (states) => !states.includes('T'));
    expect(released.includes('T')).toBe(false);
  });
});
