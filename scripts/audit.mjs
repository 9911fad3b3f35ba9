#!/usr/bin/env node
/**
 * `npm run audit`: `npm audit` of the root package and of web/, when the registry answers audits.
 * When it does not (a mirror without the audit endpoint answers 405; no network), each lockfile
 * is checked instead against scripts/advisories.json, a list of published advisories kept by hand,
 * and the output says so. Exits 1 when an installed version is affected, 0 otherwise: a missing
 * network never fails it, a known advisory always does.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const PACKAGES = ['.', 'web'];

/** Numeric comparison of `x.y.z` (a pre-release counts as its release). */
function compare(a, b) {
  const pa = a.split(/[.+-]/).slice(0, 3).map(Number);
  const pb = b.split(/[.+-]/).slice(0, 3).map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i] - pb[i];
  return 0;
}

/** Every package a lockfile installs: `[name, version, path]`. */
export function installed(lockfile) {
  return Object.entries(lockfile.packages ?? {})
    .filter(([path, entry]) => path.includes('node_modules/') && entry.version && !entry.link)
    .map(([path, entry]) => [
      path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length),
      entry.version,
      path,
    ]);
}

/** The advisories that affect what `lockfile` installs. */
export function findings(lockfile, advisories) {
  const found = [];
  for (const [name, version, path] of installed(lockfile)) {
    for (const advisory of advisories) {
      const affected =
        advisory.package === name && compare(version, advisory.introduced) >= 0 && compare(version, advisory.fixed) < 0;
      if (affected) found.push({ ...advisory, version, path });
    }
  }
  return found;
}

export function readAdvisories(root) {
  return JSON.parse(readFileSync(join(root, 'scripts', 'advisories.json'), 'utf8')).advisories;
}

/** `npm audit` of one package: its report, or undefined when the registry gave none. */
function npmAudit(root, prefix) {
  const result = spawnSync('npm', ['audit', '--json', '--prefix', join(root, prefix)], { encoding: 'utf8' });
  try {
    const report = JSON.parse(result.stdout);
    return report.metadata?.vulnerabilities ? report : undefined;
  } catch {
    return undefined;
  }
}

function main(root) {
  let affected = 0;
  for (const prefix of PACKAGES) {
    const report = npmAudit(root, prefix);
    if (report) {
      const counts = report.metadata.vulnerabilities;
      console.log(`${prefix}: npm audit: ${JSON.stringify(counts)}`);
      // Low and informational findings are reported, not failed on.
      affected += (counts.moderate ?? 0) + (counts.high ?? 0) + (counts.critical ?? 0);
      continue;
    }
    const lockfile = JSON.parse(readFileSync(join(root, prefix, 'package-lock.json'), 'utf8'));
    const found = findings(lockfile, readAdvisories(root));
    console.log(
      `${prefix}: the registry gave no audit report; checked ${installed(lockfile).length} installed packages against scripts/advisories.json: ${found.length} affected`,
    );
    for (const f of found)
      console.log(`  ${f.package} ${f.version} (${f.path}): ${f.id}, fixed in ${f.fixed}: ${f.summary}`);
    affected += found.length;
  }
  return affected === 0 ? 0 : 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = main(join(dirname(fileURLToPath(import.meta.url)), '..'));
}
