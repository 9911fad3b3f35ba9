/**
 * Fast loaders of N seeded mappings into a migrated database. Both insert in code order (see
 * `seedKeysSorted`), so the unique index on `code` is appended to rather than written all over.
 *
 * - SQLite: one transaction of one prepared statement, rollback journal in memory and no syncs
 *   while loading, then back to WAL as the service keeps it.
 * - PostgreSQL: one `COPY ... FROM STDIN` fed from here, then VACUUM ANALYZE: without it the
 *   first reads of every page set its hint bits (writes) and autovacuum starts on the fresh
 *   table, both in the middle of the first measurement.
 */
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { SEED_CREATED_AT, seedCodeOfKey, seedKeysSorted, seedUrl } from './codes.js';

export function loadSqlite(file: string, count: number): void {
  const keys = seedKeysSorted(count);
  const db = new SQLite(file);
  try {
    db.pragma('journal_mode = MEMORY');
    db.pragma('synchronous = OFF');
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma('cache_size = -262144');
    const insert = db.prepare('INSERT INTO url_mappings (code, url, created_at, click_count) VALUES (?, ?, ?, 0)');
    db.transaction(() => {
      for (let i = 0; i < count; i++) {
        const code = seedCodeOfKey(keys[i]!);
        insert.run(code, seedUrl(code), SEED_CREATED_AT);
      }
    })();
    db.pragma('locking_mode = NORMAL');
    db.pragma('journal_mode = WAL');
  } finally {
    db.close();
  }
}

/** COPY text rows of the seeded mappings, about a MiB at a time. */
function* copyRows(count: number): Generator<string> {
  const keys = seedKeysSorted(count);
  let chunk = '';
  for (let i = 0; i < count; i++) {
    const code = seedCodeOfKey(keys[i]!);
    chunk += `${code}\t${seedUrl(code)}\t${SEED_CREATED_AT}\t0\n`;
    if (chunk.length >= 1 << 20) {
      yield chunk;
      chunk = '';
    }
  }
  if (chunk !== '') yield chunk;
}

export async function loadPostgres(client: pg.Client, count: number): Promise<void> {
  const copy = client.query(copyFrom('COPY url_mappings (code, url, created_at, click_count) FROM STDIN'));
  await pipeline(Readable.from(copyRows(count)), copy);
  await client.query('VACUUM ANALYZE url_mappings');
}
