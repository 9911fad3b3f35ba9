import nodeModule from 'node:module';

/** `module.enableCompileCache`, which Node has from 22.1 on (the types installed are Node 20's). */
type EnableCompileCache = (directory?: string) => unknown;

/**
 * Turns on Node's on-disk cache of compiled code (22.1 and later; nothing on Node 20) for every
 * module loaded after the call: a process then reads V8's code for the service's 3 MB of bundled
 * JavaScript instead of compiling it again, which every process does at start (`serve`, each
 * `--workers` process, each CLI command). Where the cache lives is Node's choice:
 * `NODE_COMPILE_CACHE` if set, else a folder in the system's temporary directory; a folder it
 * cannot write leaves the cache off, and `NODE_DISABLE_COMPILE_CACHE=1` turns it off.
 */
export function enableCompileCache(): void {
  const enable = (nodeModule as { enableCompileCache?: EnableCompileCache }).enableCompileCache;
  enable?.();
}
