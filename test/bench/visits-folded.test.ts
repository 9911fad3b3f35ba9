/**
 * After a service's redirect run the bench waits until its visits are folded (none of its journal
 * rows left in `visit_journal` and none of its segments in `visit_unfolded`), so that its merge
 * and fold do not run in the next target's run (bench/lib/scenarios.ts `visitsFolded`): on a real
 * SQLite copy and a real PostgreSQL schema of the bench's 1,000-mapping dataset. And on a
 * PostgreSQL without autovacuum (this machine's and CI's), the bench vacuums what a run left dead. Needs dist/ (the loader migrates with `dist/cli.js
 * migrate`); `npm test` builds it first.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import {
  autovacuumNote,
  connectClient,
  postgresBackend,
  sqliteBackend,
  type TargetData,
} from '../../bench/lib/datasets.js';
import { visitsFolded } from '../../bench/lib/scenarios.js';
import { DATASET_SIZES } from '../../bench/lib/settings.js';
import { eventually } from '../helpers/eventually.js';
import { POSTGRES_URL, postgresAvailable } from '../helpers/services.js';

const SIZE = DATASET_SIZES.find((s) => s.mappings === 1_000)!;

/** Runs `statement` on the target's database (SQLite file or PostgreSQL schema). */
async function execute(data: TargetData, statement: string): Promise<void> {
  if (data.databaseUrl.startsWith('sqlite:')) {
    const db = new SQLite(data.databaseUrl.slice('sqlite:'.length));
    try {
      db.exec(statement);
    } finally {
      db.close();
    }
    return;
  }
  const client = await connectClient(data.databaseUrl);
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/** Lists three segments as unfolded, folds them (deletes them from the list) after `foldAfterMs`. */
async function checkWait(data: TargetData): Promise<void> {
  await execute(data, 'INSERT INTO visit_unfolded (url_id, segment_id) VALUES (1, 1), (1, 2), (2, 3)');
  expect(await data.unfoldedVisits()).toBe(3);
  const folding = new Promise<void>((resolve, reject) =>
    setTimeout(() => execute(data, 'DELETE FROM visit_unfolded').then(resolve, reject), 1_500),
  );
  const waitedMs = await visitsFolded(data, 6_000);
  await folding;
  expect(waitedMs).toBeGreaterThanOrEqual(1_450);
  expect(waitedMs).toBeLessThan(4_000);
  expect(await data.unfoldedVisits()).toBe(0);
  // Bounded: a fold that never comes is waited for `maxMs`, not for ever.
  await execute(data, 'INSERT INTO visit_unfolded (url_id, segment_id) VALUES (3, 4)');
  const boundedMs = await visitsFolded(data, 1_000);
  expect(boundedMs).toBeGreaterThanOrEqual(1_000);
  expect(boundedMs).toBeLessThan(3_000);
  // A journal row not merged yet is waited for as well.
  await execute(data, 'DELETE FROM visit_unfolded');
  await execute(data, `INSERT INTO visit_journal (written_at_ms, merged_through, visits) VALUES (1, 0, 1)`);
  expect(await data.unfoldedVisits()).toBe(1);
  expect(await visitsFolded(data, 1_000)).toBeGreaterThanOrEqual(1_000);
  await execute(data, 'DELETE FROM visit_journal');
  // Nothing to fold (no visits recorded): only the last flush's interval.
  await execute(data, 'DELETE FROM visit_unfolded');
  expect(await visitsFolded(data, 6_000)).toBeLessThan(1_500);
  expect(await visitsFolded(undefined)).toBe(0);
}

describe("the bench's wait for a service's visit fold", () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  it('on SQLite: returns once the copy has no journal row or unfolded segment, or after its bound', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bench-fold-'));
    dirs.push(dir);
    const dataset = await sqliteBackend(dir).open(SIZE, () => {});
    const data = await dataset.isolate('default');
    try {
      await checkWait(data);
    } finally {
      await data.drop();
    }
  }, 60_000);

  it.skipIf(!postgresAvailable)(
    'on PostgreSQL: returns once the schema has no journal row or unfolded segment, or after its bound; vacuums without autovacuum',
    async () => {
      const prefix = `test_fold_${randomBytes(3).toString('hex')}`;
      const client = await connectClient(POSTGRES_URL);
      try {
        const dataset = await postgresBackend(POSTGRES_URL, prefix).open(SIZE, () => {});
        const data = await dataset.isolate('default');
        try {
          await checkWait(data);
          // Rows deleted are dead until vacuumed: vacuumed here when autovacuum is off, once there
          // are more than autovacuum's threshold (50 with none live).
          await execute(
            data,
            'INSERT INTO visit_unfolded (url_id, segment_id) SELECT 1, n FROM generate_series(1, 200) AS n',
          );
          await execute(data, 'DELETE FROM visit_unfolded');
          const { rows } = await client.query<{ autovacuum: string }>('SHOW autovacuum');
          expect(await autovacuumNote(data.databaseUrl)).toEqual(
            rows[0]!.autovacuum === 'off' ? expect.stringMatching(/autovacuum off/) : undefined,
          );
          if (rows[0]!.autovacuum === 'off') {
            // (Statistics of dead rows reach pg_stat_user_tables within a second or so.)
            await eventually(async () => expect(await data.vacuum()).toContain('visit_unfolded'), {
              timeoutMs: 10_000,
              intervalMs: 200,
            });
            // Then nothing left to do: at once when no other transaction is open; while one holds an
            // older snapshot (another test's, in the full suite), VACUUM keeps the rows it may still
            // see and counts them dead again, until it ends.
            await eventually(async () => expect(await data.vacuum()).not.toContain('visit_unfolded'), {
              timeoutMs: 20_000,
              intervalMs: 500,
            });
          } else {
            expect(await data.vacuum()).toEqual([]);
          }
        } finally {
          await data.drop();
        }
      } finally {
        await client.query(`DROP SCHEMA IF EXISTS ${prefix}_1k CASCADE`);
        await client.end();
      }
    },
    60_000,
  );
});
