/**
 * `urlshortener import` at scale (issue 15: 1,000,000 rows in under a minute on SQLite): writes a
 * CSV file of N links, imports it into a fresh database with the built command line (`npm run
 * build` first), then counts the stored links and their `url.created` events. Not part of `npm test`.
 *
 *   node --import tsx bench/import.ts                                   # SQLite, 1,000,000 rows
 *   IMPORT_BENCH_ROWS=100000 IMPORT_BENCH_BACKENDS=sqlite,postgres node --import tsx bench/import.ts
 *
 * Prints the wall time of the whole command (start, migrations, reading, checking, writing,
 * closing) and rows per second.
 */
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { loadConfig } from '../src/config/loader.js';
import { openDatabase } from '../src/adapters/storage/database.js';
import { withClient } from './lib/datasets.js';
import { ROOT } from './lib/processes.js';
import { TEST_DATABASE_URL } from './lib/settings.js';

const ROWS = Number(process.env.IMPORT_BENCH_ROWS ?? 1_000_000);
const BACKENDS = (process.env.IMPORT_BENCH_BACKENDS ?? 'sqlite').split(',');
const TARGET_SECONDS = 60;

const log = (text: string) => console.log(`[import-bench] ${text}`);

/** N rows with every column given, codes `imp` + 7 digits. */
async function writeCsv(path: string, rows: number): Promise<void> {
  const out = createWriteStream(path);
  out.write('code,url,created_at,click_count,expires_at,max_visits\n');
  let piece = '';
  for (let i = 0; i < rows; i++) {
    piece += `imp${String(i).padStart(7, '0')},https://example.com/articles/${i}?ref=import,2024-05-01T12:00:00Z,${i % 1000},,\n`;
    if (piece.length > 1 << 20) {
      if (!out.write(piece)) await once(out, 'drain');
      piece = '';
    }
  }
  out.end(piece);
  await once(out, 'finish');
}

function runImport(
  file: string,
  databaseUrl: string,
): Promise<{ code: number | null; seconds: number; output: string }> {
  const started = performance.now();
  const child = spawn(process.execPath, [join(ROOT, 'dist', 'cli.js'), 'import', file], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  return new Promise((resolve) =>
    child.once('exit', (code) => resolve({ code, seconds: (performance.now() - started) / 1000, output })),
  );
}

/** Stored links and `url.created` entries of the embedded log. */
async function counted(databaseUrl: string): Promise<{ links: number; events: number }> {
  const database = openDatabase(loadConfig({ DATABASE_URL: databaseUrl }).database);
  try {
    const links = await sql<{ n: number }>`SELECT COUNT(*) AS n FROM url_mappings`.execute(database.db);
    const events = await sql<{ n: number }>`SELECT COUNT(*) AS n FROM event_log WHERE topic = 'url_events'`.execute(
      database.db,
    );
    return { links: Number(links.rows[0]!.n), events: Number(events.rows[0]!.n) };
  } finally {
    await database.close();
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'import-bench-'));
  try {
    const file = join(dir, `links-${ROWS}.csv`);
    await writeCsv(file, ROWS);
    log(`${ROWS.toLocaleString('en')} rows, ${(statSync(file).size / 1e6).toFixed(1)} MB of CSV`);
    for (const backend of BACKENDS) {
      let databaseUrl = `sqlite:${join(dir, 'import.db')}`;
      let schema: string | undefined;
      if (backend === 'postgres') {
        schema = `bench_import_${randomBytes(4).toString('hex')}`;
        await withClient(TEST_DATABASE_URL, (c) => c.query(`CREATE SCHEMA ${schema}`));
        const url = new URL(TEST_DATABASE_URL);
        url.searchParams.set('options', `-c search_path=${schema}`);
        databaseUrl = url.toString();
      }
      try {
        const { code, seconds, output } = await runImport(file, databaseUrl);
        log(
          output
            .trim()
            .split('\n')
            .find((line) => line.startsWith('importing: 100%')) ?? '',
        );
        if (code !== 0) throw new Error(`import exited with ${code}:\n${output}`);
        const { links, events } = await counted(databaseUrl);
        log(
          `${backend}: ${ROWS.toLocaleString('en')} rows in ${seconds.toFixed(1)} s = ${Math.round(ROWS / seconds).toLocaleString('en')} rows/s ` +
            `(stored ${links.toLocaleString('en')} links, ${events.toLocaleString('en')} url events)` +
            (backend === 'sqlite' && ROWS >= 1_000_000
              ? seconds < TARGET_SECONDS
                ? `, within the ${TARGET_SECONDS} s target`
                : `, OVER the ${TARGET_SECONDS} s target`
              : ''),
        );
        if (links !== ROWS || events !== ROWS) throw new Error(`expected ${ROWS} links and events`);
      } finally {
        if (schema) await withClient(TEST_DATABASE_URL, (c) => c.query(`DROP SCHEMA ${schema} CASCADE`));
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
