/**
 * The server binaries the fault suite runs as its own processes. In CI (`CI=true`) a missing one
 * fails the suite; elsewhere the suite is skipped with the reason printed.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { REDIS_SERVER_BIN } from '../helpers/own-redis-server.js';
import { inCi } from '../helpers/services.js';

/** The directory holding initdb, pg_ctl and postgres: `PG_BIN_DIR`, or Debian's newest `/usr/lib/postgresql/N/bin`. */
export function postgresBinDir(): string | undefined {
  if (process.env.PG_BIN_DIR) return process.env.PG_BIN_DIR;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], 'bin');
}

export const RUNUSER_BIN = '/usr/sbin/runuser';

/** When running as root, PostgreSQL runs as the `postgres` user (it refuses root). */
export const asRoot = process.getuid?.() === 0;

function userExists(name: string): boolean {
  try {
    execFileSync('id', ['-u', name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** What is missing for the fault suite, if anything. */
function missing(natsServerBin: string): string[] {
  const problems: string[] = [];
  const pgBin = postgresBinDir();
  if (!pgBin) problems.push('PostgreSQL server binaries (initdb, pg_ctl, postgres; Debian package `postgresql`)');
  else {
    for (const name of ['initdb', 'pg_ctl', 'postgres']) {
      if (!existsSync(join(pgBin, name))) problems.push(`${join(pgBin, name)}`);
    }
  }
  if (asRoot && !existsSync(RUNUSER_BIN)) problems.push(`${RUNUSER_BIN} (to run PostgreSQL as postgres)`);
  if (asRoot && !userExists('postgres')) problems.push('the `postgres` user (to run PostgreSQL as root)');
  if (!existsSync(REDIS_SERVER_BIN)) problems.push(`${REDIS_SERVER_BIN} (Debian package \`redis-server\`)`);
  if (!existsSync(natsServerBin)) problems.push(`${natsServerBin} (Debian package \`nats-server\`)`);
  return problems;
}

/** Whether the suite can run; throws in CI when it cannot, warns and returns false elsewhere. */
export function faultBinariesAvailable(natsServerBin: string): boolean {
  const problems = missing(natsServerBin);
  if (problems.length === 0) return true;
  const message = `the fault suite needs ${problems.join(', ')}`;
  if (inCi) throw new Error(`${message}; CI requires them (.ci/run installs them)`);
  console.warn(`skipping the fault suite: ${message}`);
  return false;
}
