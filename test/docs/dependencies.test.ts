import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The packages each `package.json` declares are the packages its code uses: every package imported
 * is declared; every package declared is imported, run by a script (its command), the types of one
 * that is (`@types/…`), or named with its reason under "Dependencies" in README.md.
 */
interface Manifest {
  readonly dependencies?: Record<string, string>;
  readonly devDependencies?: Record<string, string>;
  readonly scripts?: Record<string, string>;
}

const SOURCE = /\.(ts|js|mjs|cjs|svelte)$/;
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm;
/** What a module specifier can be: a package name with an optional subpath, a relative path, or `node:…`. */
const MODULE_SPECIFIER = /^[@\w.][\w.@/:-]*$/;

const PACKAGES = [
  { root: '.', code: ['src', 'bench', 'scripts', 'test', 'vitest.config.ts', 'eslint.config.js'] },
  { root: 'web', code: ['src', 'test', 'scripts', 'vite.config.ts', 'svelte.config.js'] },
];

/** The package a module specifier names, or undefined for relative paths and Node's own modules. */
function packageOf(specifier: string): string | undefined {
  // Text that only looks like an import (a template's `>From<`, a string after the word "from").
  if (!MODULE_SPECIFIER.test(specifier)) return undefined;
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:')) return undefined;
  const name = specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');
  return builtinModules.includes(name) ? undefined : name;
}

function importedBy(root: string, paths: readonly string[]): Set<string> {
  const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '--', ...paths], {
    cwd: root,
    encoding: 'utf8',
  })
    .split('\n')
    .filter((file) => SOURCE.test(file) && existsSync(join(root, file)));
  const names = new Set<string>();
  for (const file of files) {
    for (const [, specifier] of readFileSync(join(root, file), 'utf8').matchAll(SPECIFIER)) {
      const name = packageOf(specifier!);
      if (name) names.add(name);
    }
  }
  return names;
}

/** Whether a script runs the package: its name or one of its commands is a word of a script. */
function runByScript(root: string, name: string, scripts: readonly string[]): boolean {
  const manifest = JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as {
    bin?: string | Record<string, string>;
  };
  const commands = typeof manifest.bin === 'string' ? [name] : Object.keys(manifest.bin ?? {});
  const words = new Set(scripts.flatMap((script) => script.split(/[\s&|;()]+/)));
  return [name, ...commands].some((command) => words.has(command));
}

/** The packages README.md's "Dependencies" section names, with their reasons. */
function explained(): Map<string, string> {
  const readme = readFileSync('README.md', 'utf8');
  const section = readme.split(/^## Dependencies$/m)[1]?.split(/^## /m)[0] ?? '';
  return new Map([...section.matchAll(/^- `([^`]+)`(?: \([^)]*\))?: (.+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

describe.each(PACKAGES)('the packages of $root/package.json', ({ root, code }) => {
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Manifest;
  const declared = new Set([
    ...Object.keys(manifest.dependencies ?? {}),
    ...Object.keys(manifest.devDependencies ?? {}),
  ]);
  const imported = importedBy(root, code);
  const scripts = Object.values(manifest.scripts ?? {});

  it('declares every package its code imports', () => {
    expect([...imported].filter((name) => !declared.has(name)).sort(), 'add them with `npm install`').toEqual([]);
  });

  it('uses every package it declares, or says why it is there', () => {
    const used = (name: string): boolean => {
      if (imported.has(name) || runByScript(root, name, scripts)) return true;
      const typed = /^@types\/(.+)$/.exec(name)?.[1]?.replace(/^(.+)__(.+)$/, '@$1/$2');
      return typed !== undefined && (typed === 'node' || used(typed));
    };
    const reasons = explained();
    const unexplained = [...declared].filter((name) => !used(name) && !reasons.has(name)).sort();
    expect(unexplained, 'remove them with `npm uninstall`, or say why under "Dependencies" in README.md').toEqual([]);
  });
});

it('README.md explains only packages a package.json declares', () => {
  const declared = PACKAGES.flatMap(({ root }) => {
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Manifest;
    return [...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.devDependencies ?? {})];
  });
  expect([...explained().keys()].filter((name) => !declared.includes(name))).toEqual([]);
});
