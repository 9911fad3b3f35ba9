#!/usr/bin/env node
/**
 * `node scripts/test-cpu-summary.mjs FILE [TOP]`: what `TEST_CPU_LOG=FILE npm test` wrote
 * (test/cpu-per-file.ts), summed: the test files using the most CPU (their own and their child
 * processes'), then each directory of test/. A file that waits much longer than it computes is one
 * whose time another file's can overlap; one that computes most of its wall time holds a core.
 */
import { readFileSync } from 'node:fs';

const [file, top = '25'] = process.argv.slice(2);
if (!file) {
  console.error('usage: node scripts/test-cpu-summary.mjs FILE [TOP]');
  process.exit(2);
}
const rows = readFileSync(file, 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '')
  .map((line) => JSON.parse(line));
const cpu = (r) => r.self + r.children;
const row = (r, name) =>
  `${cpu(r).toFixed(1).padStart(8)} ${r.self.toFixed(1).padStart(7)} ${r.children.toFixed(1).padStart(9)} ${r.wall.toFixed(1).padStart(7)}  ${name}`;
const header = `${'CPU s'.padStart(8)} ${'own'.padStart(7)} ${'children'.padStart(9)} ${'wall s'.padStart(7)}`;

const sum = (list) =>
  list.reduce((a, r) => ({ self: a.self + r.self, children: a.children + r.children, wall: a.wall + r.wall }), {
    self: 0,
    children: 0,
    wall: 0,
  });
console.log(`${rows.length} test files\n${header}  file`);
for (const r of [...rows].sort((a, b) => cpu(b) - cpu(a)).slice(0, Number(top))) console.log(row(r, r.file));
const byDir = new Map();
for (const r of rows) {
  const dir = r.file.split('/').slice(0, 2).join('/');
  byDir.set(dir, [...(byDir.get(dir) ?? []), r]);
}
console.log(`\n${header}  directory (files)`);
for (const [dir, list] of [...byDir].map(([d, l]) => [d, sum(l), l.length]).sort((a, b) => cpu(b[1]) - cpu(a[1])))
  console.log(row(list, `${dir} (${byDir.get(dir).length})`));
console.log(row(sum(rows), 'all'));
