/**
 * `npm run audit`'s offline half (scripts/audit.mjs): this registry does not answer `npm audit`,
 * so both lockfiles are checked against the advisories kept in scripts/advisories.json. No
 * installed version may be affected, and the check itself must find an affected one.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript script, no types.
import * as audit from '../../scripts/audit.mjs';

interface Advisory {
  readonly id: string;
  readonly package: string;
  readonly introduced: string;
  readonly fixed: string;
}
interface Lockfile {
  readonly packages: Record<string, { version?: string }>;
}
const { findings, readAdvisories, PACKAGES } = audit as {
  findings(lockfile: Lockfile, advisories: readonly Advisory[]): (Advisory & { version: string; path: string })[];
  readAdvisories(root: string): Advisory[];
  PACKAGES: string[];
};

const ROOT = join(import.meta.dirname, '..', '..');
const advisories = readAdvisories(ROOT);

describe('dependency advisories', () => {
  it.each(PACKAGES)('%s/package-lock.json installs no version with a known advisory', (prefix) => {
    const lockfile = JSON.parse(readFileSync(join(ROOT, prefix, 'package-lock.json'), 'utf8')) as Lockfile;
    expect(findings(lockfile, advisories)).toEqual([]);
  });

  it('finds the advisories of an affected version, nested or not, and none of a fixed one', () => {
    const lockfile: Lockfile = {
      packages: {
        '': { version: '1.0.0' },
        'node_modules/@fastify/static': { version: '9.3.0' },
        'node_modules/@fastify/swagger-ui/node_modules/@fastify/static': { version: '10.1.2' },
        'node_modules/kysely': { version: '0.28.17' },
        'node_modules/nanoid': { version: '3.3.11' },
      },
    };
    const found = findings(lockfile, advisories).map((f) => `${f.path}@${f.version} ${f.id}`);
    expect(found.sort()).toEqual(
      [
        'node_modules/@fastify/static@9.3.0 GHSA-83w8-p2f5-377r',
        'node_modules/@fastify/static@9.3.0 GHSA-8pvw-jcv7-9cmj',
        'node_modules/@fastify/static@9.3.0 GHSA-423g-23ch-w7c6',
        'node_modules/@fastify/swagger-ui/node_modules/@fastify/static@10.1.2 GHSA-423g-23ch-w7c6',
        'node_modules/nanoid@3.3.11 GHSA-2v37-7h3g-55p8',
      ].sort(),
    );
  });

  it('keeps each advisory well formed', () => {
    for (const a of advisories) {
      expect(a.id).toMatch(/^GHSA-[a-z0-9]{4}-[a-z0-9]{4}-[a-z0-9]{4}$/);
      expect(a.introduced).toMatch(/^\d+\.\d+\.\d+$/);
      expect(a.fixed).toMatch(/^\d+\.\d+\.\d+$/);
    }
  });
});
