/**
 * A preload that times every better-sqlite3 statement a process runs, summed by its SQL text
 * (the first 90 characters), and writes the sums to STMT_TIMER_OUT (default
 * /tmp/stmt-<pid>.json) every 5 s and at exit, largest first. For profiling, never in a test:
 *
 *   AB_ENV_timed='AB_FLAGS=--import=./bench/stmt-timer.mjs' AB_VARIANTS=timed node --import tsx bench/ab.ts
 *   node --import ./bench/stmt-timer.mjs --import tsx bench/visit-flush.ts
 *
 * Each entry: [sql, { n: runs, us: µs in all, max: longest run in µs }].
 */
import { writeFileSync } from 'node:fs';
import Database from 'better-sqlite3';

const out = process.env.STMT_TIMER_OUT || `/tmp/stmt-${process.pid}.json`;
const stats = new Map();
const probe = new Database(':memory:');
const Statement = Object.getPrototypeOf(probe.prepare('SELECT 1'));
probe.close();
for (const method of ['run', 'all', 'get', 'iterate']) {
  const original = Statement[method];
  Statement[method] = function timed(...args) {
    const start = process.hrtime.bigint();
    try {
      return original.apply(this, args);
    } finally {
      const us = Number(process.hrtime.bigint() - start) / 1000;
      const key = this.source.replace(/\s+/g, ' ').trim().slice(0, 90);
      const entry = stats.get(key) ?? { n: 0, us: 0, max: 0 };
      entry.n++;
      entry.us += us;
      entry.max = Math.max(entry.max, us);
      stats.set(key, entry);
    }
  };
}
const dump = () => writeFileSync(out, JSON.stringify([...stats].sort((a, b) => b[1].us - a[1].us)));
setInterval(dump, 5000).unref();
process.on('exit', dump);
