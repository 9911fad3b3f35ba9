/**
 * Visit retention while visits keep arriving and the database fails. Two API processes keep one
 * day of visits (VISIT_RETENTION_DAYS=1) and run retention every 200 ms; the links also hold a
 * year-old history, written before the load as a batch of the visit buffer's would be. Visitors
 * follow the links through both processes while the database fails under them (PostgreSQL: their
 * connections dropped every 40 ms for 6 s; SQLite: another process holds the write lock for 6 s),
 * so retention, the flushes, the merge and the fold all meet the fault and each other. The
 * checker, once both stopped gracefully: no visit older than the day kept, and no day row of a day
 * before it; every redirect answered 302 is one visit row, none lost and none doubled; the day
 * rows equal a recount of the rows kept. On SQLite and on PostgreSQL (the embedded bus; retention
 * records no event). The built server (`npm run build`).
 */
import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import { KyselyVisitRepository } from '../../src/adapters/storage/kysely-visit-repository.js';
import type { DatabaseSchema } from '../../src/adapters/storage/schema.js';
import { DAY_MS, dayOf } from '../../src/domain/visit.js';
import { eventually } from '../helpers/eventually.js';
import { DROP_STORM_MS, FLEET_VARIANTS, useFleet, useFleetReader } from '../helpers/fleet.js';
import { send } from '../helpers/http-client.js';
import { chromeVisit, rollupsAndRecount, visitBatch } from '../helpers/visits.js';

const LINKS = 6;
/** Old visits of each link: a year ago, spread over this many days, this many a day. */
const OLD_DAYS = 30;
const OLD_A_DAY = 20;

/** Retention records no event: the bus the fleet runs on changes nothing here, so NATS is left out (CI's time). */
const VARIANTS = FLEET_VARIANTS.filter((variant) => !variant.nats);

describe.each(VARIANTS)('visit retention while visits arrive and the database fails, on $name', (variant) => {
  const test = it.skipIf(!variant.available);
  const fleet = useFleet(
    variant,
    { RATE_LIMIT_ENABLED: 'false', VISIT_RETENTION_DAYS: '1', VISIT_RETENTION_INTERVAL_MS: '200', EVENT_POLL_MS: '50' },
    { workers: 0, apis: 2 },
  );
  const reader = useFleetReader(variant, fleet);

  test('keeps exactly the visits of the day kept, each 302 once, and day rows that match them', async () => {
    const [a, b] = fleet.apis.map((api) => api.url) as [string, string];
    const db = reader.db as unknown as Kysely<DatabaseSchema>;
    const codes = Array.from({ length: LINKS }, (_, i) => `retain${i}`);
    const ids = new Map<string, number>();
    for (const code of codes) {
      const created = await send(a, 'POST', '/shorten', {
        body: { code, url: `https://example.com/${code}`, created_at: '2024-01-01T00:00:00Z', click_count: 0 },
      });
      expect(created.status, created.text).toBe(201);
      ids.set(code, created.json<{ id: number }>().id);
    }
    // A year-old history, written as the buffer writes a batch (its segments unfolded: the
    // processes fold them, and only then may retention delete them).
    const repository = new KyselyVisitRepository(db, reader.dialect);
    const yearAgo = Date.now() - 365 * DAY_MS;
    for (const [code, id] of ids) {
      const visits = Array.from({ length: OLD_DAYS * OLD_A_DAY }, (_, v) =>
        chromeVisit(id, yearAgo + Math.floor(v / OLD_A_DAY) * DAY_MS + (v % OLD_A_DAY) * 60_000),
      );
      expect(await repository.writeBatch(visitBatch(`old-${code}`, visits))).toBe(true);
    }

    const fault = fleet.failDatabase(DROP_STORM_MS);
    let faulted = false;
    void fault.finally(() => (faulted = true));
    const redirected = new Map<string, number>(codes.map((code) => [code, 0]));
    const statuses: Record<string, number> = {};
    const visitor = async (n: number) => {
      for (let i = 0; !faulted || i < 50; i++) {
        const code = codes[(n + i) % LINKS]!;
        const answer = await send(n % 2 === 0 ? a : b, 'GET', `/${code}`).catch(() => undefined);
        const status = String(answer?.status ?? 'no answer');
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (status === '302') redirected.set(code, redirected.get(code)! + 1);
      }
    };
    const [what] = await Promise.all([fault, ...Array.from({ length: 4 }, (_, n) => visitor(n))]);
    console.log(`retention on ${variant.name}: ${what}; redirects ${JSON.stringify(statuses)}`);
    expect(Object.keys(statuses).filter((s) => s !== '302' && s !== '503')).toEqual([]);

    // Retention catches up with the old visits once the database is back, and the day rows go with them.
    const cutoff = Date.now() - DAY_MS;
    await eventually(
      async () => {
        const old = await db
          .selectFrom('visit_segments')
          .select((eb) => eb.fn.countAll<string | number>().as('n'))
          .where('last_ms', '<', cutoff)
          .executeTakeFirstOrThrow();
        expect(Number(old.n), 'segments older than the day kept').toBe(0);
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    // A graceful stop writes the visits each process still holds.
    for (const api of fleet.apis) expect(await api.stop()).toBe(0);

    const oldDays = await db.selectFrom('visit_days').select('day').where('day', '<', dayOf(cutoff)).execute();
    expect(oldDays).toEqual([]);
    for (const [code, id] of ids) {
      const { count, recount, stored } = await rollupsAndRecount(db, id);
      expect(count, `visits of ${code}`).toBe(redirected.get(code));
      expect(stored, `day rows of ${code}`).toEqual(recount);
    }
  }, 120_000);
});
