/**
 * The native tools the bench drives. It installs nothing: it says what is missing and how to get
 * it (Debian package names), and stops when it cannot measure honestly without it.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

export interface Tools {
  readonly wrk: string;
  /** Undefined: not installed, the node:net stand-in measures the ceiling. */
  readonly nginx: string | undefined;
  readonly notes: readonly string[];
}

function which(command: string, extraDirs: readonly string[] = []): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(':'), ...extraDirs].filter(Boolean);
  return dirs.map((dir) => `${dir}/${command}`).find((path) => existsSync(path));
}

function version(command: string, args: readonly string[]): string {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  return `${result.stdout}${result.stderr}`.split('\n')[0]!.trim();
}

/** Finds wrk, taskset (when pinning) and nginx; throws with the install line when one is required. */
export function findTools(pinning: boolean): Tools {
  const wrk = which('wrk');
  const taskset = which('taskset');
  const nginx = which('nginx', ['/usr/sbin', '/usr/local/sbin']);
  const missing: string[] = [];
  if (wrk === undefined) missing.push('wrk (the load generator): apt-get install wrk');
  if (pinning && taskset === undefined) missing.push('taskset (core pinning): apt-get install util-linux');
  if (missing.length > 0) {
    throw new Error(
      `missing: ${missing.join('; ')}\n` +
        `npm run bench installs nothing by itself; as root: apt-get update && apt-get install wrk nginx-light util-linux`,
    );
  }
  const notes = [`wrk: ${version(wrk!, ['--version'])}`];
  notes.push(
    nginx === undefined
      ? 'nginx is not installed (apt-get install nginx-light): the generator ceiling is measured against the ' +
          "node:net stand-in (bench/ceiling-server.ts), which may be below wrk's own ceiling, so more figures may be GENERATOR-BOUND"
      : `ceiling server: ${version(nginx, ['-v'])}`,
  );
  return { wrk: wrk!, nginx, notes };
}
