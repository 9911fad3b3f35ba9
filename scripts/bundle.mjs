#!/usr/bin/env node
/**
 * `npm run build:server`'s second step: bundles what `tsc` compiled into `build/tsc/` into `dist/`,
 * with esbuild, so that a process of the service opens about 400 files instead of about 1,700
 * (our 250 modules and the packages' own: typebox alone is 374 files, Kysely 265). Node's ESM
 * loader reading, resolving and linking them was more than half of a start: `serve` on a new
 * SQLite file took 1.0 s (1.3 s of CPU) before it listened, and takes 0.6 s (0.75 s) bundled;
 * `urlshortener openapi` 0.99 s, now 0.64 (hyperfine, 2026-11-30). Every process pays it:
 * `npm start`, each `--workers` process, each CLI command, and each of the hundreds the tests start.
 *
 * The entry points keep their paths (`dist/cli.js`, `dist/instrumentation.js`, the sandbox
 * thread's program); what they share is split into chunks (`dist/chunks/`), so a module the
 * instrumentation and the service both import (the configuration, tracing's state) is loaded
 * once, as before. Left outside the bundle, loaded from node_modules as before:
 * - native modules (better-sqlite3, bcrypt) and packages that read files beside their own code
 *   (`__dirname`: QuickJS's WebAssembly, Swagger UI's and @fastify/static's assets,
 *   @fastify/swagger's package.json, pino's transport threads);
 * - what tracing patches where it is loaded (ioredis, required by the first Redis connection and
 *   patched as it is required) and the OpenTelemetry packages (one copy of each, shared with the
 *   import-in-the-middle hook of `--import ./dist/instrumentation.js`);
 * - `pg`, which the storage adapter requires only when it opens a PostgreSQL database (on Node 20,
 *   loading it loads node's `fetch` too: 30 ms of every start on SQLite, before).
 *   No entry below: esbuild leaves a `createRequire(…)('pg')` call alone.
 * The bundle carries source maps (`node --enable-source-maps` shows `src/` lines in stacks).
 * Plain JavaScript: it runs before anything is compiled.
 */
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';

/** Loaded from node_modules at run time, not bundled (see above). */
export const EXTERNAL = [
  'better-sqlite3',
  'bcrypt',
  'quickjs-emscripten',
  '@jitl/*',
  '@fastify/swagger-ui',
  '@fastify/static',
  '@fastify/swagger',
  'pino',
  'ioredis',
  '@opentelemetry/*',
];

/** The programs Node starts: the command line, the `--import` preload, the sandbox's threads. */
export const ENTRY_POINTS = ['cli.js', 'instrumentation.js', 'adapters/sandbox/sandbox-thread.js'];

export async function bundle(root) {
  const compiled = join(root, 'build', 'tsc');
  const out = join(root, 'dist');
  rmSync(out, { recursive: true, force: true });
  await build({
    entryPoints: ENTRY_POINTS.map((path) => join(compiled, path)),
    outbase: compiled,
    outdir: out,
    bundle: true,
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    format: 'esm',
    platform: 'node',
    target: 'node20',
    external: EXTERNAL,
    sourcemap: 'linked',
    logLevel: 'warning',
    // CommonJS packages inside an ES module bundle call `require`, which an ES module lacks.
    banner: {
      js: "import { createRequire as __bundleRequire } from 'node:module'; const require = __bundleRequire(import.meta.url);",
    },
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await bundle(join(dirname(fileURLToPath(import.meta.url)), '..'));
}
