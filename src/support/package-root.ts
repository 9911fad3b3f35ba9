import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The project's folder (the one with its package.json), found from wherever this module was
 * loaded: `src/support/` when run from the sources (tests), or a file of the bundled build in
 * `dist/`, whose layout is esbuild's (scripts/bundle.mjs), not the sources'. Paths of files the
 * service reads at run time (the web client, the sandbox thread's program) start from here.
 */
export const PACKAGE_ROOT = findPackageRoot(dirname(fileURLToPath(import.meta.url)));

function findPackageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}
