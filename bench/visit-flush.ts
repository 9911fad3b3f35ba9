/**
 * The CPU a visit costs at flush time, without HTTP: records FLUSH_BENCH_VISITS visits spread
 * evenly over FLUSH_BENCH_MAPPINGS links (one User-Agent, 250 addresses) into a VisitBuffer on a
 * fresh SQLite file, then flushes, FLUSH_BENCH_ROUNDS times, and prints the flush's CPU µs per
 * visit. FLUSH_BENCH_DROP: one SQL statement run after the migrations (an experiment such as
 * `DROP INDEX visits_url_time`). Not part of `npm test`.
 *
 *   node --import tsx bench/visit-flush.ts
 *   FLUSH_BENCH_MAPPINGS=1000 FLUSH_BENCH_VISITS=20000 FLUSH_BENCH_ROUNDS=10 node --import tsx bench/visit-flush.ts
 */
import { sql } from 'kysely';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../src/adapters/storage/database.js';
import { KyselyVisitRepository } from '../src/adapters/storage/kysely-visit-repository.js';
import { migrateToLatest } from '../src/adapters/storage/migrations.js';
import { loadConfig } from '../src/config/loader.js';
import { VisitBuffer } from '../src/support/visit-buffer.js';

const MAPPINGS = Number(process.env.FLUSH_BENCH_MAPPINGS ?? 1000);
const VISITS = Number(process.env.FLUSH_BENCH_VISITS ?? 10_000);
const ROUNDS = Number(process.env.FLUSH_BENCH_ROUNDS ?? 10);
const AGENT =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';

const dir = mkdtempSync(join(tmpdir(), 'visit-flush-bench-'));
const database = openDatabase(
  loadConfig({ DATABASE_URL: `sqlite:${join(dir, 'b.db')}`, LOG_LEVEL: 'silent' }).database,
);
try {
  await migrateToLatest(database.db, database.dialect);
  if (process.env.FLUSH_BENCH_DROP) await sql.raw(process.env.FLUSH_BENCH_DROP).execute(database.db);
  const buffer = new VisitBuffer(new KyselyVisitRepository(database.db, database.dialect), { flushIntervalMs: 60_000 });
  const headers = ['Host', 'bench', 'User-Agent', AGENT];
  const perVisit: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < VISITS; i++) buffer.record(1 + ((i * 7919) % MAPPINGS), headers, `10.0.${i % 250}.${round}`);
    const start = process.cpuUsage();
    await buffer.flush();
    const used = process.cpuUsage(start);
    perVisit.push((used.user + used.system) / VISITS);
  }
  perVisit.sort((a, b) => a - b);
  console.log(
    `[visit-flush-bench] ${VISITS} visits over ${MAPPINGS} links a flush: CPU µs per visit, median ${perVisit[Math.floor(ROUNDS / 2)]!.toFixed(1)}, min ${perVisit[0]!.toFixed(1)}`,
  );
} finally {
  await database.db.destroy();
  rmSync(dir, { recursive: true, force: true });
}
