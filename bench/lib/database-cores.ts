/**
 * The PostgreSQL server's processes, when it runs on this machine: pinned to the target cores
 * while a PostgreSQL group runs, and their CPU time counted. Left where the system put them, they
 * ran beside wrk on the generator's core (the service's core being busy): during `default`'s runs
 * over 10,000,000 mappings they took 40–117 % of a core, wrk fell from about 55 % of its core to
 * 12–35 %, and the service's req/s measured a starved generator (bench/PROFILE.md). The database
 * is part of the target: it works for the service, on the service's cores, as nginx, the baseline
 * and every variant are pinned there.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { registerCleanup } from './cleanup.js';
import { withClient } from './datasets.js';
import { cpuSeconds, processTree } from './processes.js';

export interface DatabaseProcesses {
  /** The postmaster: its tree is every PostgreSQL process (backends are forked from it). */
  readonly pid: number;
  /** Where its processes ran before, and now ("3-5", "1"). */
  readonly before: string;
  readonly pinnedTo: string | undefined;
  /** CPU seconds of the server: every process now, and those that ended (their time is the postmaster's once reaped). */
  cpuSeconds(): number;
  /** Puts every process back on the cores it had (also at clean-up, if the bench is interrupted). */
  release(): Promise<void>;
}

function statusField(pid: number, field: string): string | undefined {
  try {
    return new RegExp(`^${field}:\\s*(.*)$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]?.trim();
  } catch {
    return undefined;
  }
}

/**
 * `taskset -a -p -c <cores>` on each process of the tree (every thread), over again until every
 * process found is on `cores`: a backend the server forks while a pass runs, from a parent not yet
 * changed, has the parent's old cores and is not in the pass's list (a test of the bench, next to
 * other test files' connections, once found one left pinned after its release). False if any
 * refused.
 */
function pinTree(pid: number, cores: string): boolean {
  for (let pass = 0; pass < 10; pass++) {
    let pinned = true;
    for (const member of processTree(pid)) {
      const result = spawnSync('taskset', ['-a', '-p', '-c', cores, String(member)], { stdio: 'ignore' });
      // A backend that ended meanwhile is not a refusal.
      if (result.status !== 0 && statusField(member, 'Pid') !== undefined) pinned = false;
    }
    if (!pinned) return false;
    // The root is pinned first: its list, as /proc writes it, is what every process should show.
    const wanted = statusField(pid, 'Cpus_allowed_list');
    const left = processTree(pid).filter((member) => {
      const allowed = statusField(member, 'Cpus_allowed_list');
      return allowed !== undefined && allowed !== wanted;
    });
    if (left.length === 0) return true;
  }
  return true; // Still forking faster than this pins: the next pass's backends end with their connections.
}

/**
 * The postmaster of `databaseUrl`'s server if it runs here (the parent of this connection's
 * backend), its tree pinned to `cores`; undefined, with the reason in `notes`, when it runs
 * elsewhere (nothing to pin or count). When pinning is refused (another user's server) its CPU is
 * still counted where /proc lets it be read.
 */
export async function pinDatabase(
  databaseUrl: string,
  cores: readonly number[],
  notes: string[],
): Promise<DatabaseProcesses | undefined> {
  // Read while the connection is open: its backend ends with it.
  const parent = await withClient(databaseUrl, async (client) => {
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    return Number(statusField(Number(rows[0]!.pid), 'PPid'));
  });
  const name = Number.isInteger(parent) && parent > 0 ? statusField(parent, 'Name') : undefined;
  if (name === undefined || !name.startsWith('postgres')) {
    notes.push(
      'PostgreSQL is not a process of this machine (or of this pid namespace): its processes are not pinned and their CPU is not counted',
    );
    return undefined;
  }
  const before = statusField(parent, 'Cpus_allowed_list') ?? '';
  const wanted = cores.join(',');
  let pinnedTo: string | undefined;
  if (wanted !== '') {
    if (pinTree(parent, wanted)) pinnedTo = wanted;
    else notes.push(`PostgreSQL's processes could not all be pinned to core(s) ${wanted} (taskset refused)`);
  }
  const unpin = async () => {
    if (pinnedTo !== undefined && before !== '') pinTree(parent, before);
  };
  const release = registerCleanup(unpin);
  return { pid: parent, before, pinnedTo, cpuSeconds: () => cpuSeconds(parent), release };
}
