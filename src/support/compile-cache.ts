import { lstatSync, mkdirSync } from 'node:fs';
import nodeModule from 'node:module';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

/** `module.enableCompileCache`, which Node has from 22.1 on (the types installed are Node 20's). */
type EnableCompileCache = (directory: string) => unknown;

/** Node's, or null on Node 20. */
const NODE_ENABLE = (nodeModule as { enableCompileCache?: EnableCompileCache }).enableCompileCache ?? null;

/**
 * Turns on Node's on-disk cache of compiled code (22.1 and later; nothing on Node 20) for every
 * module loaded after the call: a process then reads V8's code for the service's 3 MB of bundled
 * JavaScript instead of compiling it again, which every process does at start (`serve`, each
 * `--workers` process, each CLI command).
 *
 * The cache is code the process runs, so it is kept only in a folder no other account can
 * change: `urlshortener/node-compile-cache` in `XDG_CACHE_HOME` (default `~/.cache`), made with
 * mode 0700, every folder from the cache home down owned by this account (or root) and writable
 * by no one else, none a symbolic link. Not Node's default, a shared folder in the system's
 * temporary directory, where another account could make the folder first and fill it. Where
 * that cannot be had (no home, a read-only one, a folder others can write), the cache stays off.
 * `NODE_DISABLE_COMPILE_CACHE=1` turns it off; `NODE_COMPILE_CACHE=<folder>` is Node's own
 * setting, which turns the cache on in that folder by itself: this leaves it to Node.
 *
 * Returns the folder it turned the cache on in, or undefined.
 */
export function enableCompileCache(
  env: NodeJS.ProcessEnv = process.env,
  enable: EnableCompileCache | null = NODE_ENABLE,
): string | undefined {
  if (enable === null || env.NODE_DISABLE_COMPILE_CACHE || env.NODE_COMPILE_CACHE) return undefined;
  // Resolved, so that walking up from the folder meets it (a trailing slash, a `.`): unresolved,
  // the walk went past it (and refused, or at `/` never ended).
  const home = resolve(env.XDG_CACHE_HOME || join(homedir(), '.cache'));
  const folder = join(home, 'urlshortener', 'node-compile-cache');
  try {
    mkdirSync(folder, { recursive: true, mode: 0o700 });
  } catch {
    return undefined; // no home, or one this account cannot write
  }
  for (let dir = folder; ; dir = dirname(dir)) {
    if (!isPrivate(dir)) return undefined;
    if (dir === home) break;
  }
  enable(folder);
  return folder;
}

/** A real folder (not a link) owned by this account or root, which no other account can write. */
function isPrivate(dir: string): boolean {
  const stat = lstatSync(dir, { throwIfNoEntry: false });
  if (stat === undefined || !stat.isDirectory()) return false;
  const uid = process.getuid?.();
  return (stat.uid === uid || stat.uid === 0) && (stat.mode & 0o022) === 0;
}
