/**
 * The CPU a visit costs off the redirect path, without HTTP: records FLUSH_BENCH_VISITS visits
 * spread evenly over FLUSH_BENCH_MAPPINGS links (one User-Agent, 250 addresses) into a VisitBuffer
 * on a fresh SQLite file, then flushes (a journal row each), FLUSH_BENCH_ROUNDS times, merging the
 * journal into segments and folding the day rows after every FLUSH_BENCH_FOLD_EVERY flushes (5: a
 * fold every 5 s at one flush a second), and prints the CPU µs per visit of the capture (`record`),
 * of the flush, of the merge and of the fold, medians of the rounds, and the wall time of a
 * journal row's write (p50, p90, longest: on SQLite what it holds the event loop for).
 * FLUSH_BENCH_WARMUP_ROUNDS: rounds run first and not measured (0), for a database with a history.
 * FLUSH_BENCH_FOLD_SEGMENTS: segments a fold transaction takes (250; the service sizes its own by
 * time). FLUSH_BENCH_DROP: one SQL statement run after the migrations (an experiment).
 * FLUSH_BENCH_MIXED=1: visits from six User-Agents (a bot among them) and four referrers instead of
 * one User-Agent, so that a link's visits do not all share their fields.
 * FLUSH_BENCH_DATABASE_URL=postgres://…: on PostgreSQL instead, in a schema of its own
 * (`visit_flush_bench`, made afresh and dropped after), with the server's CPU a visit beside each
 * phase's (`+ db`), where the server runs on this machine. Not part of `npm test`.
 *
 *   node --import tsx bench/visit-flush.ts
 *   FLUSH_BENCH_MAPPINGS=1000 FLUSH_BENCH_VISITS=20000 FLUSH_BENCH_ROUNDS=10 node --import tsx bench/visit-flush.ts
 */
import { sql } from 'kysely';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../src/adapters/storage/database.js';
import { KyselyVisitJournal } from '../src/adapters/storage/kysely-visit-journal.js';
import { KyselyVisitRepository } from '../src/adapters/storage/kysely-visit-repository.js';
import { migrateToLatest } from '../src/adapters/storage/migrations.js';
import { mergeJournal } from '../src/composition/visits.js';
import { loadConfig } from '../src/config/loader.js';
import { VisitBuffer } from '../src/support/visit-buffer.js';
import { pinDatabase } from './lib/database-cores.js';
import { urlWithSchema, withClient } from './lib/datasets.js';

const MAPPINGS = Number(process.env.FLUSH_BENCH_MAPPINGS ?? 1000);
const VISITS = Number(process.env.FLUSH_BENCH_VISITS ?? 10_000);
const ROUNDS = Number(process.env.FLUSH_BENCH_ROUNDS ?? 10);
/**
 * Rounds run first and not measured: a history of segments and day rows, as a database that has
 * been recording for a while holds (its indexes then spread over more pages).
 */
const WARMUP_ROUNDS = Number(process.env.FLUSH_BENCH_WARMUP_ROUNDS ?? 0);
const FOLD_EVERY = Number(process.env.FLUSH_BENCH_FOLD_EVERY ?? 5);
/** Segments a fold transaction takes (the service sizes its own by time: about 2 ms each). */
const FOLD_SEGMENTS = Number(process.env.FLUSH_BENCH_FOLD_SEGMENTS ?? 250);
const AGENT =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';
const MIXED_AGENTS = [
  AGENT,
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Mobile/15E148 Safari/604.1',
  'Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0',
  'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Safari/605.1.15',
  'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
];
const MIXED_REFERRERS = [
  'https://news.example.com/a',
  'https://social.example.org/p/1',
  'https://mail.example.net/',
  '',
];

/** Journal rows, and their write's p50, p90 and longest in ms. */
function writeSummary(ms: readonly number[]): string {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) => (sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? NaN).toFixed(2);
  return `${sorted.length} rows, ms p50 ${at(0.5)} p90 ${at(0.9)} longest ${at(1)}`;
}

const dir = mkdtempSync(join(tmpdir(), 'visit-flush-bench-'));
const postgresUrl = process.env.FLUSH_BENCH_DATABASE_URL;
const SCHEMA = 'visit_flush_bench';
if (postgresUrl) {
  await withClient(postgresUrl, (client) =>
    client.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE; CREATE SCHEMA ${SCHEMA}`),
  );
}
const database = openDatabase(
  loadConfig({
    DATABASE_URL: postgresUrl ? urlWithSchema(postgresUrl, SCHEMA) : `sqlite:${join(dir, 'b.db')}`,
    LOG_LEVEL: 'silent',
  }).database,
);
const notes: string[] = [];
const server = postgresUrl ? await pinDatabase(postgresUrl, [], notes) : undefined;
for (const note of notes) console.log(`[visit-flush-bench] ${note}`);
try {
  await migrateToLatest(database.db, database.dialect);
  if (process.env.FLUSH_BENCH_DROP) await sql.raw(process.env.FLUSH_BENCH_DROP).execute(database.db);
  const repository = new KyselyVisitRepository(database.db, database.dialect);
  const journal = new KyselyVisitJournal(database.db, database.dialect);
  // Each journal row's write timed (wall ms: on SQLite what it holds the event loop for).
  const writes: number[] = [];
  const timedWrites: Pick<typeof journal, 'write'> & Pick<typeof repository, 'daySalt'> = {
    write: async (entry) => {
      const started = performance.now();
      const written = await journal.write(entry);
      if (measuring) writes.push(performance.now() - started);
      return written;
    },
    daySalt: (day) => repository.daySalt(day),
  };
  let measuring = false;
  const buffer = new VisitBuffer(timedWrites, { flushIntervalMs: 60_000 });
  const mixed = process.env.FLUSH_BENCH_MIXED === '1';
  const headersOf = (i: number): string[] => {
    if (!mixed) return ['Host', 'bench', 'User-Agent', AGENT];
    const referrer = MIXED_REFERRERS[(i * 31) % MIXED_REFERRERS.length]!;
    const agent = ['User-Agent', MIXED_AGENTS[(i * 17) % MIXED_AGENTS.length]!];
    return ['Host', 'bench', ...agent, ...(referrer ? ['Referer', referrer] : [])];
  };
  const headerLists = Array.from({ length: 997 }, (_, i) => headersOf(i));
  /** The CPU µs `work` took here (`own`), and the database server's (`server`, 0 on SQLite). */
  const cpu = async (work: () => unknown) => {
    const start = process.cpuUsage();
    const serverStart = server?.cpuSeconds() ?? 0;
    await work();
    const used = process.cpuUsage(start);
    return { own: used.user + used.system, server: ((server?.cpuSeconds() ?? 0) - serverStart) * 1e6 };
  };
  /** µs per visit, each phase's rounds: this process's, and the server's. */
  const phases = { record: [] as number[], flush: [] as number[], merge: [] as number[], fold: [] as number[] };
  const db = { flush: [] as number[], merge: [] as number[], fold: [] as number[] };
  const keep = (phase: 'flush' | 'merge' | 'fold', used: { own: number; server: number }, visits: number) => {
    phases[phase].push(used.own / visits);
    db[phase].push(used.server / visits);
  };
  for (let round = 1; round <= WARMUP_ROUNDS + ROUNDS; round++) {
    const measured = round > WARMUP_ROUNDS;
    const base = round * VISITS;
    const recording = await cpu(() => {
      for (let i = 0; i < VISITS; i++)
        buffer.record(1 + (((base + i) * 7919) % MAPPINGS), headerLists[i % 997]!, `10.0.${i % 250}.${round}`);
    });
    measuring = measured;
    const flushing = await cpu(() => buffer.flush());
    if (measured) phases.record.push(recording.own / VISITS);
    if (measured) keep('flush', flushing, VISITS);
    if (round % FOLD_EVERY === 0) {
      const merging = await cpu(() => mergeJournal(journal));
      if (measured) keep('merge', merging, VISITS * FOLD_EVERY);
      const upTo = await repository.foldMark();
      const folding = await cpu(async () => {
        for (let after: number | undefined = 0; after !== undefined;) {
          after = (await repository.fold(FOLD_SEGMENTS, upTo, after)).through;
        }
      });
      if (measured) keep('fold', folding, VISITS * FOLD_EVERY);
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;
  // The server's CPU is counted in 10 ms ticks: averaged over the rounds, not a median of each.
  const mean = (values: number[]) => values.reduce((total, value) => total + value, 0) / Math.max(1, values.length);
  const withDb = (own: number, server: number) =>
    postgresUrl ? `${own.toFixed(2)} + db ${server.toFixed(2)}` : own.toFixed(2);
  const [dbFlush, dbMerge, dbFold] = [mean(db.flush), mean(db.merge), mean(db.fold)];
  const [r, f, m, d] = [median(phases.record), median(phases.flush), median(phases.merge), median(phases.fold)];
  const stored = await sql<{ bytes: number; visits: number }>`
    SELECT SUM(LENGTH(data)) AS bytes, SUM(visits) AS visits FROM visit_segments`.execute(database.db);
  const bytesPerVisit = Number(stored.rows[0]!.bytes) / Number(stored.rows[0]!.visits);
  console.log(
    `[visit-flush-bench] ${VISITS} visits${mixed ? ' (mixed)' : ''} over ${MAPPINGS} links a flush, ${bytesPerVisit.toFixed(1)} segment bytes a visit, a fold every ${FOLD_EVERY}: CPU µs per visit, medians${postgresUrl ? " (+ the server's, means)" : ''}: record ${r.toFixed(2)}, flush ${withDb(f, dbFlush)}, merge ${withDb(m, dbMerge)}, fold ${withDb(d, dbFold)}, in all ${withDb(r + f + m + d, dbFlush + dbMerge + dbFold)}; a journal row's write ${writeSummary(writes)}`,
  );
} finally {
  await database.db.destroy();
  if (postgresUrl) await withClient(postgresUrl, (client) => client.query(`DROP SCHEMA ${SCHEMA} CASCADE`));
  await server?.release();
  rmSync(dir, { recursive: true, force: true });
}
