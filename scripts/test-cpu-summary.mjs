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
  if (!byDir.has(dir)) byDir.set(dir, []);
  byDir.get(dir).push(r);
}
console.log(`\n${header}  directory (files)`);
const dirs = [...byDir].map(([dir, list]) => ({ dir, files: list.length, total: sum(list) }));
for (const { dir, files, total } of dirs.sort((a, b) => cpu(b.total) - cpu(a.total)))
  console.log(row(total, `${dir} (${files})`));
console.log(row(sum(rows), 'all'));
