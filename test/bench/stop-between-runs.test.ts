import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { openTransactionsOf, withClient } from '../../bench/lib/datasets.js';
import { type StoppableTarget, signalTree, stopBetweenRuns } from '../../bench/lib/processes.js';
import { POSTGRES_URL, postgresAvailable } from '../helpers/services.js';

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
  const started: ReturnType<typeof startTree>[] = [];
  afterEach(() => {
    // Each child too: killed, a parent cannot take its child along, which would outlive the test.
    for (const tree of started.splice(0)) {
      for (const pid of [tree.child(), tree.parent.pid!]) {
        try {
          if (pid !== 0) process.kill(pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
    }
  });

  it('stops each tree whole, continues one for its turn, and all of them at the end', async () => {
    const a = startTree();
    const b = startTree();
    started.push(a, b);
    for (let tries = 0; (a.child() === 0 || b.child() === 0) && tries < 100; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const [aPid, bPid] = [a.parent.pid!, b.parent.pid!];
    const stopped = await stopBetweenRuns([aPid, bPid]);
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

/**
 * A process on its own PostgreSQL connection (named `name`): `loop` runs short transactions back
 * to back (most of its time inside one, as a target's batches of creates under load), `hold`
 * opens one and never ends it. Resolves once connected.
 */
async function startDatabaseClient(name: string, mode: 'loop' | 'hold'): Promise<ChildProcess> {
  // Ready once connected, and for `hold` once its transaction is open (a stop before that would
  // find none).
  const work =
    mode === 'loop'
      ? `console.log('ready');
         for (;;) { await c.query('BEGIN'); await c.query('SELECT pg_sleep(0.03)'); await c.query('COMMIT');
           await new Promise((r) => setTimeout(r, 5)); }`
      : `await c.query('BEGIN'); await c.query('SELECT 1'); console.log('ready'); setInterval(() => {}, 1000);`;
  const child = spawn(
    process.execPath,
    [
      '-e',
      `const c = new (require('pg').Client)({ connectionString: process.env.URL });
       (async () => { await c.connect(); ${work} })();`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, URL: POSTGRES_URL, PGAPPNAME: name } },
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`client exited with ${code}`)));
  });
  return child;
}

describe('a target over a shared database is stopped only between its transactions', () => {
  const started: ChildProcess[] = [];
  afterEach(() => {
    for (const child of started) {
      signalTree(child.pid!, 'SIGCONT');
      child.kill('SIGKILL');
    }
    started.length = 0;
  });

  /**
   * Transactions open now on `name`'s connections, read by the test's own query (the targets below
   * are asked through the bench's `openTransactionsOf`).
   */
  const openOn = (name: string): Promise<number> =>
    withClient(POSTGRES_URL, async (client) => {
      const { rows } = await client.query<{ n: string }>(
        'SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1 AND xact_start IS NOT NULL',
        [name],
      );
      return Number(rows[0]!.n);
    });

  it.skipIf(!postgresAvailable)(
    'never leaves one stopped inside a transaction, where a plain stop mostly does',
    async () => {
      const name = `stop-between-runs-${process.pid}-loop`;
      const child = await startDatabaseClient(name, 'loop');
      started.push(child);
      const pid = child.pid!;
      // Without asking, a stop lands inside a transaction most of the time: what the check is for.
      let insideOne = 0;
      for (let i = 0; i < 20; i++) {
        signalTree(pid, 'SIGSTOP');
        await statesOf([pid], allStopped);
        if ((await openOn(name)) > 0) insideOne++;
        signalTree(pid, 'SIGCONT');
        await new Promise((resolve) => setTimeout(resolve, 7));
      }
      expect(insideOne).toBeGreaterThan(0);

      const target: StoppableTarget = { pid, openTransactions: () => openTransactionsOf(POSTGRES_URL, name) };
      const stopped = await stopBetweenRuns([target]);
      try {
        expect(await statesOf([pid], allStopped)).toEqual(['T']);
        expect(await openOn(name)).toBe(0);
        for (let turn = 0; turn < 8; turn++) {
          await stopped.during(pid, () => new Promise((resolve) => setTimeout(resolve, 60)));
          expect(await statesOf([pid], allStopped)).toEqual(['T']);
          expect(await openOn(name)).toBe(0);
        }
        expect(stopped.warnings).toEqual([]);
      } finally {
        await stopped.release();
      }
    },
    30_000,
  );

  it.skipIf(!postgresAvailable)(
    'stops one that never ends its transaction after the timeout, and says so',
    async () => {
      const name = `stop-between-runs-${process.pid}-hold`;
      const child = await startDatabaseClient(name, 'hold');
      started.push(child);
      const pid = child.pid!;
      const stopped = await stopBetweenRuns(
        [{ pid, openTransactions: () => openTransactionsOf(POSTGRES_URL, name) }],
        300,
      );
      try {
        expect(await statesOf([pid], allStopped)).toEqual(['T']);
        expect(stopped.warnings).toEqual([
          expect.stringMatching(new RegExp(`^pid ${pid} stopped with 1 transaction\\(s\\) open after 0.3 s`)),
        ]);
      } finally {
        await stopped.release();
      }
    },
    30_000,
  );
});
