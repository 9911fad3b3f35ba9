/**
 * The visit writer with its database failing under load: a flush that fails before its commit is
 * retried and loses nothing; one whose commit went through but whose answer was lost is retried
 * and written once (its batch id is already there); PostgreSQL away behind a cut proxy while
 * redirects keep being answered from the cache: every acknowledged redirect arrives once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compose, type Service } from '../../src/composition/compose.js';
import type { VisitBatch, VisitRepository } from '../../src/ports/visit-repository.js';
import { addVisitor, decodeVisitDay, emptyVisitDay } from '../../src/domain/visit-day.js';
import { VisitBuffer, visitorHash } from '../../src/support/visit-buffer.js';
import { useTestApp } from '../helpers/app.js';
import { BACKENDS, postgres, type TestDatabase, testConfig } from '../helpers/backends.js';
import { codeMaker, createMapping, newMapping } from '../helpers/http.js';
import { POSTGRES_URL } from '../helpers/services.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { rollupsAndRecount, USER_AGENTS } from '../helpers/visits.js';

type Mode = 'up' | 'down' | 'lost-answer';

/** The real repository, failing as told: before writing (`down`), or after committing (`lost-answer`). */
function failing(real: VisitRepository, mode: () => Mode): Pick<VisitRepository, 'writeBatch' | 'daySalt'> {
  return {
    async writeBatch(batch: VisitBatch) {
      const now = mode();
      if (now === 'down') throw new Error('database unavailable');
      const written = await real.writeBatch(batch);
      if (now === 'lost-answer') throw new Error('connection lost after commit');
      return written;
    },
    async daySalt(day: number) {
      if (mode() === 'down') throw new Error('database unavailable');
      return real.daySalt(day);
    },
  };
}

describe.each(BACKENDS)('the visit writer failing on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  const t = useTestApp(backend);

  test('visits recorded through failing flushes are all written, once', async () => {
    const link = await createMapping(t.app, newMapping(codeMaker('vwf')));
    const { id } = await t.service.database.db
      .selectFrom('url_mappings')
      .select('id')
      .where('code', '=', link.code)
      .executeTakeFirstOrThrow();
    const modes: Mode[] = ['down', 'up', 'lost-answer', 'down', 'lost-answer', 'up', 'down'];
    let mode: Mode = 'up';
    const buffer = new VisitBuffer(
      failing(t.service.visits.repository, () => mode),
      { flushIntervalMs: 60_000 },
    );
    let recorded = 0;
    for (const next of modes) {
      mode = next;
      // Load: visits keep arriving while the flush runs.
      const flushing = buffer.flush();
      for (let i = 0; i < 300; i++) {
        buffer.record(
          id,
          ['User-Agent', USER_AGENTS[i % USER_AGENTS.length] ?? '', 'Referer', 'https://r.example/'],
          `10.0.${i % 7}.1`,
        );
        recorded++;
        if (i % 50 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
      await flushing;
    }
    mode = 'up';
    await buffer.flush();
    await buffer.flush();
    expect(buffer.size).toBe(0);
    const { count, recount, stored } = await rollupsAndRecount(t.service.database.db, id);
    expect(count).toBe(recorded);
    expect(stored).toEqual(recount);
    // 6 User-Agents × 7 addresses = 42 visitors a day: each day's stored sketch holds exactly the
    // registers of those 42, made from the day's salt, however often a batch was retried. (Its
    // estimate is a sketch's, within a few of 42 depending on the random salt: compared exactly,
    // the registers say more.)
    const { db } = t.service.database;
    const days = await db.selectFrom('visit_days').select(['day', 'data']).where('url_id', '=', id).execute();
    expect(days.length).toBe(recount.length);
    for (const { day, data } of days) {
      const { salt } = await db
        .selectFrom('visit_salts')
        .select('salt')
        .where('day', '=', Number(day))
        .executeTakeFirstOrThrow();
      const expected = emptyVisitDay();
      for (const agent of USER_AGENTS) {
        for (let a = 0; a < 7; a++) addVisitor(expected, visitorHash(salt, `10.0.${a}.1`, agent ?? ''));
      }
      expect([...decodeVisitDay(data).sketch]).toEqual([...expected.sketch]);
    }
  });
});

describe.skipIf(!postgres.available)('PostgreSQL away while visits are recorded', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let service: Service;

  beforeAll(async () => {
    database = await postgres.create();
    const target = new URL(POSTGRES_URL);
    proxy = await TcpProxy.start(target.hostname, Number(target.port || 5432));
    const url = new URL(database.databaseUrl);
    url.host = `127.0.0.1:${proxy.port}`;
    service = await compose(
      testConfig(url.toString(), { DB_CONNECT_TIMEOUT_MS: '500', CLICK_FLUSH_INTERVAL_MS: '50' }),
      { logger: false },
    );
    await service.app.ready();
  });
  afterAll(async () => {
    await proxy?.pass();
    await service?.close();
    await proxy?.close();
    await database?.drop();
  });

  it('answers redirects from the cache, holds their visits, and writes each once when it is back', async () => {
    const link = await createMapping(service.app, newMapping(codeMaker('pgv')));
    const redirect = () =>
      service.app.inject({ method: 'GET', url: `/${link.code}`, headers: { 'user-agent': USER_AGENTS[0] } });
    let acknowledged = 0;
    const load = async (n: number) => {
      for (let i = 0; i < n; i++) if ((await redirect()).statusCode === 302) acknowledged++;
    };
    await load(50);
    await proxy.refuse();
    await Promise.all([load(100), load(100), new Promise((resolve) => setTimeout(resolve, 300))]);
    await service.visits.buffer!.flush(); // fails: held for the next one
    const held = service.visits.buffer!.size;
    expect(held).toBeGreaterThan(0);
    await proxy.blackhole();
    await service.visits.buffer!.flush(); // fails within the connection deadline: held again
    expect(service.visits.buffer!.size).toBe(held);
    await proxy.pass();
    await load(50);
    await service.visits.buffer!.flush();
    await service.visits.buffer!.flush();
    expect(service.visits.buffer!.size).toBe(0);
    const { id } = await service.database.db
      .selectFrom('url_mappings')
      .select('id')
      .where('code', '=', link.code)
      .executeTakeFirstOrThrow();
    const { count, recount, stored } = await rollupsAndRecount(service.database.db, id);
    // The checker: what was acknowledged (302) against what arrived (a miss may answer 503 while away).
    expect(acknowledged).toBeGreaterThanOrEqual(100);
    expect(count).toBe(acknowledged);
    expect(stored).toEqual(recount);
  }, 60_000);
});
