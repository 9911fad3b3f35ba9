/**
 * The bundled build (`npm run build:server`: scripts/bundle.mjs) keeps what a bundle of ES modules
 * can break without a test noticing until a rarely taken path runs: every entry point is where
 * the service and its threads look for it, and no bundled code refers to `__dirname` or
 * `__filename`, which an ES module does not have (a package that reads files beside its own code
 * belongs in the bundle's `EXTERNAL` list; @fastify/swagger's read of its package.json swallowed
 * the ReferenceError and went on without it). `npm test` builds before it runs this.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript script (it runs before anything is compiled), no types.
import * as bundleScript from '../../scripts/bundle.mjs';

const ROOT = join(import.meta.dirname, '..', '..');
const DIST = join(ROOT, 'dist');
const { ENTRY_POINTS } = bundleScript as { ENTRY_POINTS: string[] };

const javascriptFiles = (dir: string) =>
  (readdirSync(dir, { recursive: true }) as string[])
    .filter((path) => path.endsWith('.js'))
    .map((path) => join(dir, path));

describe.skipIf(!existsSync(join(DIST, 'cli.js')) && process.env.CI !== 'true')('the bundled build in dist/', () => {
  it('has each entry point at its source path: the command line, the --import preload, the sandbox thread', () => {
    for (const entry of ENTRY_POINTS) expect(existsSync(join(DIST, entry)), entry).toBe(true);
    expect(ENTRY_POINTS).toEqual(
      expect.arrayContaining(['cli.js', 'instrumentation.js', 'adapters/sandbox/sandbox-thread.js']),
    );
  });

  it('refers to no __dirname or __filename (undefined in an ES module)', () => {
    const found = javascriptFiles(DIST).flatMap((file) =>
      readFileSync(file, 'utf8')
        .split('\n')
        .map((line, index) => ({ line, at: `${relative(ROOT, file)}:${index + 1}` }))
        .filter(({ line }) => /\b__(dirname|filename)\b/.test(line))
        .map(({ at, line }) => `${at}: ${line.trim().slice(0, 120)}`),
    );
    expect(found).toEqual([]);
  });
});
