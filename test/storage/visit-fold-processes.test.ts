/**
 * Two processes writing visit batches to one SQLite file and folding them at the same time, a few
 * segments a step, as `--workers 2` does every few seconds (here without a pause): no fold step
 * fails (a step reads before it writes; begun deferred, it failed with SQLITE_BUSY_SNAPSHOT when
 * the other process had written since), and every visit written is in its link's day rows once.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { sqlite } from '../helpers/backends.js';
import { useOpenDatabase } from '../helpers/storage.js';
import { foldRun, rollupsAndRecount } from '../helpers/visits.js';
import { KyselyVisitRepository } from '../../src/adapters/storage/kysely-visit-repository.js';

const FOLDER = fileURLToPath(new URL('../fixtures/visit-folder.ts', import.meta.url));
const BATCHES = 40;

type Report = { written: number; steps: number; failures: string[] };

describe('visit folds from two processes on one SQLite file', () => {
  const { database, testDatabase } = useOpenDatabase(sqlite);

  it('no fold step fails, and every visit is in its day row once', async () => {
    const run = (seed: number) =>
      promisify(execFile)(process.execPath, ['--import', 'tsx', FOLDER, String(seed), String(BATCHES)], {
        env: { ...process.env, DATABASE_URL: testDatabase.databaseUrl },
        timeout: 90_000,
      });
    const reports = (await Promise.all([run(0), run(1)])).map(({ stdout }) => JSON.parse(stdout.trim()) as Report);
    for (const report of reports) {
      expect(report.failures).toEqual([]);
      expect(report.steps).toBeGreaterThan(BATCHES);
    }
    // Whatever either left (none, when both ran to the end).
    await foldRun(new KyselyVisitRepository(database.db, database.dialect), 1_000);
    expect(await database.db.selectFrom('visit_unfolded').selectAll().execute()).toEqual([]);
    for (let urlId = 100; urlId < 140; urlId++) {
      const { count, recount, stored } = await rollupsAndRecount(database.db, urlId);
      expect(count).toBe(2 * BATCHES * 10);
      expect(stored).toEqual(recount);
    }
  }, 120_000);
});
