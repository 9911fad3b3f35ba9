import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { KyselyVisitRepository } from '../../src/adapters/storage/kysely-visit-repository.js';
import { DAY_MS, type VisitRecord } from '../../src/domain/visit.js';
import { BACKENDS } from '../helpers/backends.js';
import { useOpenDatabase, useOtherInstance } from '../helpers/storage.js';
import { allVisitPages, foldRun, rollupsAndRecount, visitBatch } from '../helpers/visits.js';

const BROWSERS = ['Chrome', 'Firefox', 'Safari', null];

function visitsOf(urlId: number, count: number, start: number, spreadMs: number, seed: number): VisitRecord[] {
  return Array.from({ length: count }, (_, n) => {
    const k = (n * 7919 + seed * 104_729) % 1_000_003;
    return {
      urlId,
      visitedAt: start + (k % spreadMs),
      referrerHost: k % 3 === 0 ? null : `r${k % 11}.example`,
      browser: BROWSERS[k % 4]!,
      os: k % 5 === 0 ? null : 'Linux',
      device: k % 13 === 0 ? 'bot' : 'mobile',
      bot: k % 13 === 0,
      country: k % 2 === 0 ? 'FR' : null,
    };
  });
}

/** Visit storage on both backends: segments paged as rows, and folds into day rows under concurrency. */
describe.each(BACKENDS)('VisitRepository on $name', (backend) => {
  const suite = useOpenDatabase(backend);
  const { database } = suite;
  const other = useOtherInstance(backend, suite);
  let visits: KyselyVisitRepository;
  let others: KyselyVisitRepository;

  beforeAll(() => {
    if (!backend.available) return;
    visits = new KyselyVisitRepository(database.db, database.dialect);
    others = new KyselyVisitRepository(other.db, other.dialect);
  });

  /**
   * What earlier tests left folded, then one batch of `perLink` visits of each of `links` (within
   * a minute of `start`), written unfolded; the fold mark after it.
   */
  const writeUnfolded = async (links: readonly number[], perLink: number, start: number) => {
    await foldRun(visits, 1_000);
    const batchVisits = links.flatMap((urlId) => visitsOf(urlId, perLink, start, 60_000, urlId));
    await visits.writeBatch(
      visitBatch(
        randomUUID(),
        batchVisits,
        batchVisits.map((_, n) => n),
      ),
    );
    return visits.foldMark();
  };

  it.skipIf(!backend.available)(
    'pages a link’s visits newest first, each once, across overlapping segments, folded or not, while a fold runs',
    async () => {
      const start = Date.UTC(2026, 10, 20, 23, 59); // the visits span midnight
      const all: VisitRecord[] = [];
      // Batches whose times overlap (instances, and batches held and written late), of other links too.
      const writeBatches = async (batches: readonly number[]) => {
        for (const batch of batches) {
          const own = visitsOf(1, 700, start, 180_000, batch);
          all.push(...own);
          await visits.writeBatch(visitBatch(randomUUID(), [...own, ...visitsOf(2, 50, start, 180_000, batch)]));
        }
      };
      const from = start + 20_000;
      const to = start + 150_000;
      const key = (v: VisitRecord) =>
        JSON.stringify([v.visitedAt, v.referrerHost, v.browser, v.os, v.device, v.bot, v.country]);
      const checkPages = (seen: readonly (VisitRecord & { id: number })[]) => {
        const expected = all.filter((v) => v.visitedAt >= from && v.visitedAt < to);
        expect(seen).toHaveLength(expected.length);
        expect(new Set(seen.map((v) => v.id)).size).toBe(seen.length);
        for (let i = 1; i < seen.length; i++) {
          const [a, b] = [seen[i - 1]!, seen[i]!];
          expect(a.visitedAt > b.visitedAt || (a.visitedAt === b.visitedAt && a.id > b.id)).toBe(true);
        }
        expect(seen.map(key).sort()).toEqual(expected.map(key).sort());
      };
      // Half of them folded (listed by link), half not.
      await writeBatches([0, 1, 2]);
      await foldRun(visits, 1_000);
      await writeBatches([3, 4, 5]);
      const seen = await allVisitPages(visits, { urlId: 1, from, to }, 97, 100);
      checkPages(seen);
      // The same pages while a fold moves the rest from one list to the other, a segment a step.
      const [during] = await Promise.all([allVisitPages(visits, { urlId: 1, from, to }, 97, 100), foldRun(visits, 1)]);
      expect(during).toEqual(seen);
      expect(await allVisitPages(visits, { urlId: 1, from, to }, 97, 100)).toEqual(seen);
    },
  );

  it.skipIf(!backend.available)(
    'a fold run steps through whole links in id order, leaving the segments written after its mark to the next run',
    async () => {
      const links = Array.from({ length: 10 }, (_, i) => 300 + i);
      const start = Date.UTC(2026, 10, 22, 12);
      const writeRound = (round: number) => {
        // One segment a link a round (its visits within a second).
        const batchVisits = links.flatMap((urlId) => visitsOf(urlId, 5, start + round * 120_000, 1_000, round + urlId));
        return visits.writeBatch(
          visitBatch(
            randomUUID(),
            batchVisits,
            batchVisits.map((_, n) => n),
          ),
        );
      };
      await foldRun(visits, 1_000); // what earlier tests left
      for (let round = 0; round < 3; round++) await writeRound(round);
      const steps = await foldRun(visits, 4, () => writeRound(3));
      // 4 segments reach into a link's 3: each step takes two whole links.
      expect(steps).toEqual([
        ...[301, 303, 305, 307, 309].map((through) => ({ segments: 6, through })),
        { segments: 0, through: undefined },
      ]);
      const left = await database.db.selectFrom('visit_unfolded').select(['url_id', 'segment_id']).execute();
      expect(left.map((row) => Number(row.url_id)).sort()).toEqual(links);
      expect(await foldRun(visits, 1_000)).toEqual([
        { segments: 10, through: 309 },
        { segments: 0, through: undefined },
      ]);
      for (const urlId of links) {
        const { count, recount, stored } = await rollupsAndRecount(database.db, urlId);
        expect(count).toBe(4 * 5);
        expect(stored).toEqual(recount);
      }
    },
    30_000,
  );

  it.skipIf(!backend.available)(
    'a fold step says how long it held the event loop: its whole time on SQLite, its JavaScript only on PostgreSQL',
    async () => {
      const links = Array.from({ length: 30 }, (_, i) => 500 + i);
      const upTo = await writeUnfolded(links, 40, Date.UTC(2026, 10, 23, 12));
      // Another turn of the loop keeps running while the step waits for its statements: on
      // PostgreSQL a step's wall time includes this 30 ms, its held time must not.
      const started = performance.now();
      const busy = new Promise((resolve) => setImmediate(resolve)).then(() => {
        const until = performance.now() + 30;
        while (performance.now() < until);
      });
      const step = await visits.fold(1_000, upTo, 0);
      const wallMs = performance.now() - started;
      await busy;
      expect(step.segments).toBe(links.length);
      expect(step.heldMs).toBeGreaterThan(0);
      if (database.dialect === 'sqlite') {
        // Synchronous from its first statement to its commit: the busy turn ran after it.
        expect(step.heldMs).toBeLessThanOrEqual(wallMs);
      } else {
        expect(wallMs).toBeGreaterThanOrEqual(30);
        expect(step.heldMs).toBeLessThan(wallMs - 25);
      }
    },
  );

  it.skipIf(!backend.available)(
    'two instances folding while batches are written: every visit in its day row once, statistics the same before and after',
    async () => {
      const links = Array.from({ length: 40 }, (_, i) => 100 + i);
      const start = Date.UTC(2026, 10, 21, 23, 58);
      let writing = true;
      const folder = async (repository: KyselyVisitRepository) => {
        let folded = 0;
        while (writing) {
          // A whole run, a few segments a step.
          for (const step of await foldRun(repository, 7)) folded += step.segments;
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
        return folded;
      };
      const folding = [folder(visits), folder(others)];
      const writers = [visits, others].map(async (repository, w) => {
        for (let batch = 0; batch < 15; batch++) {
          const batchVisits = links.flatMap((urlId) => visitsOf(urlId, 25, start, 240_000, batch * 2 + w + urlId));
          await repository.writeBatch(
            visitBatch(
              randomUUID(),
              batchVisits,
              batchVisits.map((_, n) => n),
            ),
          );
          // The folders' timers get their turn (on SQLite every call finishes in microtasks).
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
      });
      await Promise.all(writers);
      writing = false;
      const folded = await Promise.all(folding);
      expect(folded[0]! + folded[1]!).toBeGreaterThan(0);
      const range = { from: start - DAY_MS, to: start + 2 * DAY_MS };
      const beforeLastFold = await Promise.all(links.map((urlId) => visits.days({ urlId, ...range })));
      for (const urlId of links) {
        const { count, recount, stored } = await rollupsAndRecount(database.db, urlId);
        expect(count).toBe(2 * 15 * 25);
        expect(stored).toEqual(recount);
      }
      expect(await database.db.selectFrom('visit_unfolded').selectAll().execute()).toEqual([]);
      expect(await Promise.all(links.map((urlId) => visits.days({ urlId, ...range })))).toEqual(beforeLastFold);
    },
    60_000,
  );

  // PostgreSQL only: on SQLite a fold takes the write lock first and waits for the other's.
  it.skipIf(!backend.available || backend.name !== 'postgres')(
    'a fold passes over the segments another instance holds (a cut fold its server has not yet rolled back), and a later fold takes them once',
    async () => {
      const links = [700, 701, 702, 703];
      const upTo = await writeUnfolded(links, 10, Date.UTC(2026, 10, 24, 9));
      // The other instance's transaction holds the first two links' segments, as a fold's take does.
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let held!: () => void;
      const holding = new Promise<void>((resolve) => (held = resolve));
      const holder = other.db.transaction().execute(async (trx) => {
        await trx
          .selectFrom('visit_unfolded')
          .select('segment_id')
          .where('url_id', 'in', links.slice(0, 2))
          .forUpdate()
          .execute();
        held();
        await released;
        throw new Error('rolled back');
      });
      await holding;
      // The whole list in one step: it takes the two links nobody holds, and waits for none.
      const passing = await visits.fold(1_000, upTo, 0);
      expect(passing.segments).toBe(2);
      // Only the held ones left: a step of their range takes nothing while they are held.
      expect(await visits.fold(1_000, upTo, 0)).toMatchObject({ segments: 0 });
      release();
      await expect(holder).rejects.toThrow('rolled back');
      expect(await visits.fold(1_000, upTo, 0)).toMatchObject({ segments: 2 });
      for (const urlId of links) {
        const { count, recount, stored } = await rollupsAndRecount(database.db, urlId);
        expect(count).toBe(10);
        expect(stored).toEqual(recount);
      }
    },
  );
});
