/**
 * Where the compile cache may live (src/support/compile-cache.ts): only in a folder no other
 * account can change. Real folders on disk; the call that turns Node's cache on is recorded
 * instead of made, since Node 20 (this suite's main runtime) has none and one process can turn it
 * on only once. test/server/cli.test.ts checks the real cache of a real command on Node 24.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { enableCompileCache } from '../../src/support/compile-cache.js';

const root = mkdtempSync(join(tmpdir(), 'urlshortener-compile-cache-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const folderIn = (home: string) => join(home, 'urlshortener', 'node-compile-cache');

function attempt(env: NodeJS.ProcessEnv, available = true): { folder: string | undefined; enabled: string[] } {
  const enabled: string[] = [];
  const folder = enableCompileCache(env, available ? (dir) => enabled.push(dir) : null);
  return { folder, enabled };
}

describe('the compile cache folder', () => {
  it('is made private (0700) in XDG_CACHE_HOME and the cache turned on there', () => {
    const home = mkdtempSync(join(root, 'home-'));
    const { folder, enabled } = attempt({ XDG_CACHE_HOME: home });
    expect(folder).toBe(folderIn(home));
    expect(enabled).toEqual([folderIn(home)]);
    expect(statSync(folderIn(home)).mode & 0o777).toBe(0o700);
    expect(statSync(join(home, 'urlshortener')).mode & 0o777).toBe(0o700);
  });

  it('is found from a cache home written with a trailing slash or relative to the working folder', () => {
    const home = mkdtempSync(join(root, 'home-'));
    expect(attempt({ XDG_CACHE_HOME: `${home}/` }).enabled).toEqual([folderIn(home)]);
    expect(attempt({ XDG_CACHE_HOME: `${home}/./` }).enabled).toEqual([folderIn(home)]);
    expect(attempt({ XDG_CACHE_HOME: relative(process.cwd(), home) }).enabled).toEqual([folderIn(home)]);
  });

  it('is used again as it is', () => {
    const home = mkdtempSync(join(root, 'home-'));
    attempt({ XDG_CACHE_HOME: home });
    expect(attempt({ XDG_CACHE_HOME: home }).enabled).toEqual([folderIn(home)]);
  });

  it.each([
    ['the folder itself', (home: string) => folderIn(home)],
    ['its parent', (home: string) => join(home, 'urlshortener')],
    ['the cache home', (home: string) => home],
  ])('is refused when others can write %s: the cache stays off', (_, writable) => {
    const home = mkdtempSync(join(root, 'home-'));
    mkdirSync(folderIn(home), { recursive: true, mode: 0o700 });
    chmodSync(writable(home), 0o777);
    expect(attempt({ XDG_CACHE_HOME: home })).toEqual({ folder: undefined, enabled: [] });
    chmodSync(writable(home), 0o757);
    expect(attempt({ XDG_CACHE_HOME: home }).enabled, 'writable by others, not by the group').toEqual([]);
    chmodSync(writable(home), 0o775);
    expect(attempt({ XDG_CACHE_HOME: home }).enabled, 'writable by the group').toEqual([]);
  });

  it('is refused when it is a symbolic link, wherever it points', () => {
    const home = mkdtempSync(join(root, 'home-'));
    const elsewhere = mkdtempSync(join(root, 'elsewhere-'));
    chmodSync(elsewhere, 0o700);
    mkdirSync(join(home, 'urlshortener'), { mode: 0o700 });
    symlinkSync(elsewhere, folderIn(home));
    expect(attempt({ XDG_CACHE_HOME: home }).enabled).toEqual([]);
  });

  it('is not made where it cannot be (a file in the way): the cache stays off, nothing thrown', () => {
    const home = mkdtempSync(join(root, 'home-'));
    const blocked = join(home, 'file');
    symlinkSync('/dev/null', blocked);
    expect(attempt({ XDG_CACHE_HOME: blocked })).toEqual({ folder: undefined, enabled: [] });
  });

  it('is left to Node with NODE_COMPILE_CACHE, and not made with NODE_DISABLE_COMPILE_CACHE=1 or on Node 20', () => {
    const home = mkdtempSync(join(root, 'home-'));
    expect(attempt({ XDG_CACHE_HOME: home, NODE_COMPILE_CACHE: join(home, 'own') }).enabled).toEqual([]);
    expect(attempt({ XDG_CACHE_HOME: home, NODE_DISABLE_COMPILE_CACHE: '1' }).enabled).toEqual([]);
    expect(attempt({ XDG_CACHE_HOME: home }, false)).toEqual({ folder: undefined, enabled: [] });
    expect(existsSync(join(home, 'urlshortener'))).toBe(false);
  });
});
