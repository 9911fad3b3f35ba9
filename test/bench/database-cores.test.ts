/**
 * The bench pins the PostgreSQL server's processes to the target cores while a PostgreSQL group
 * runs, and counts their CPU time (bench/lib/database-cores.ts): the server's processes are found
 * from a connection's backend, pinned (every thread of every process), counted without falling
 * when backends end, and put back as they were.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { pinDatabase } from '../../bench/lib/database-cores.js';
import { connectClient } from '../../bench/lib/datasets.js';
import { processTree } from '../../bench/lib/processes.js';
import { POSTGRES_URL, postgresAvailable } from '../helpers/services.js';

const allowed = (pid: number) => /^Cpus_allowed_list:\s*(.*)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];

/** Every thread of every process of the tree: where each may run. */
function treeAffinities(pid: number): Set<string> {
  const found = new Set<string>();
  for (const member of processTree(pid)) {
    try {
      for (const task of readFileSync(`/proc/${member}/task/${member}/status`, 'utf8').match(
        /^Cpus_allowed_list:.*$/gm,
      ) ?? [])
        found.add(task.split(/:\s*/)[1]!);
    } catch {
      // Ended meanwhile.
    }
  }
  return found;
}

/** A connection that does some work and ends (its backend's time then counts as the postmaster's children's). */
async function busyConnection(): Promise<void> {
  const client = await connectClient(POSTGRES_URL);
  try {
    await client.query('SELECT count(*) FROM generate_series(1, 2000000)');
  } finally {
    await client.end();
  }
}

describe("the bench's PostgreSQL processes", () => {
  it.skipIf(!postgresAvailable)(
    'are pinned to the given cores, counted across backends that end, and put back',
    async () => {
      const notes: string[] = [];
      const database = await pinDatabase(POSTGRES_URL, [0], notes);
      if (database === undefined) {
        // The server runs elsewhere (another host or pid namespace): the bench says so and goes on.
        expect(notes.join()).toMatch(/not a process of this machine/);
        process.stdout.write(`PostgreSQL not local, pinning not tested: ${notes.join('; ')}\n`);
        return;
      }
      try {
        expect(notes).toEqual([]);
        expect(database.pinnedTo).toBe('0');
        expect(treeAffinities(database.pid)).toEqual(new Set(['0']));
        const before = database.cpuSeconds();
        // A backend started now is forked from the pinned postmaster: pinned too.
        const client = await connectClient(POSTGRES_URL);
        const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        expect(allowed(Number(rows[0]!.pid))).toBe('0');
        await client.end();
        await Promise.all([busyConnection(), busyConnection()]);
        await new Promise((resolve) => setTimeout(resolve, 200));
        // Their backends have ended: their time is still counted.
        expect(database.cpuSeconds() - before).toBeGreaterThan(0.05);
      } finally {
        await database.release();
      }
      expect(treeAffinities(database.pid)).toEqual(new Set([database.before]));
    },
    30_000,
  );
});
