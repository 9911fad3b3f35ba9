/**
 * Issue 15 item 3, a link's lifecycle: optional `expires_at` and `max_visits` on `POST /shorten`,
 * `POST /api/v1/links` and `PATCH /{code}`; past either, `GET /{code}` answers 410 and counts
 * nothing (no click, no visit); `url.expired` once per stop, whichever of two instances notices it (README "Expiry and
 * visit limits"). Two instances of the service share one database here, on both backends.
 */
import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { useTestApp } from '../helpers/app.js';
import { BACKENDS, useTestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import {
  codeMaker,
  expectError,
  expectRedirect,
  expectValidationError,
  findListed,
  HTTP_TEST_ENV,
  type Injector,
  newMapping,
  patchMapping,
  postShorten,
} from '../helpers/http.js';
import { storedClicks } from '../helpers/stored-clicks.js';
import { chromeVisit, rollupsAndRecount, visitBatch, visitRows } from '../helpers/visits.js';

const ENV = { ...HTTP_TEST_ENV, EVENT_POLL_MS: '50' };
const TARGET = 'https://example.com/target';
const inSeconds = (s: number) => new Date(Date.now() + s * 1000).toISOString();

interface ExpiredPayload {
  id: number;
  code: string;
  url: string;
  expires_at: string | null;
  max_visits: number | null;
  reason: 'expired_at' | 'max_visits';
}

describe.each(BACKENDS)('link lifecycle on $name', (backend) => {
  const database = useTestDatabase(backend);
  const a = useTestApp(backend, ENV, { database });
  const b = useTestApp(backend, ENV, { database });
  const nextCode = codeMaker(backend.name === 'sqlite' ? 'lfs' : 'lfp');
  const skip = !backend.available;

  /** Every `url.expired` recorded (the embedded log is the outbox), oldest first. */
  async function expiredEvents(code?: string): Promise<ExpiredPayload[]> {
    const db = a.service.database.db as unknown as Kysely<EventTables>;
    const rows = await db
      .selectFrom('event_log')
      .select(['envelope'])
      .where('topic', '=', 'url_events')
      .orderBy('message_id')
      .execute();
    return rows
      .map((row) => JSON.parse(row.envelope) as { event_type: string; payload: ExpiredPayload })
      .filter((e) => e.event_type === 'url.expired' && (code === undefined || e.payload.code === code))
      .map((e) => e.payload);
  }

  const get = (app: Injector, code: string, method: 'GET' | 'HEAD' = 'GET') => app.inject({ method, url: `/${code}` });
  const clicksOf = async (code: string) => {
    await a.service.clicks.flush();
    await b.service.clicks.flush();
    return storedClicks(a.service.database.db, { code });
  };
  /** The link's visit rows once both instances have written the visits they hold and the journal is merged. */
  const visitsOf = async (code: string) => {
    await a.service.visits.buffer!.flush();
    await b.service.visits.buffer!.flush();
    await a.service.visits.merge();
    return (await visitRows(a.service.database.db, code)).length;
  };

  it.skipIf(skip)(
    'merge() returns with every visit written before it merged, while the other instance merges at the same time',
    async () => {
      // A merge run stops when it finds another merging (that one goes on with the rows): the
      // call must wait for it, or the visits it was asked for may not be there yet.
      const body = newMapping(nextCode);
      await postShorten(a, body);
      let visits = 0;
      for (let round = 0; round < 20; round++) {
        expectRedirect(await get(a, body.code), body.url);
        expectRedirect(await get(b, body.code), body.url);
        visits += 2;
        await a.service.visits.buffer!.flush();
        await b.service.visits.buffer!.flush();
        const other = b.service.visits.merge();
        await a.service.visits.merge();
        expect((await visitRows(a.service.database.db, body.code)).length, `round ${round}`).toBe(visits);
        await other;
      }
    },
  );

  it.skipIf(skip)(
    'fold() returns with every segment written before it folded, while the other instance folds at the same time',
    async () => {
      const body = newMapping(nextCode);
      const { id } = (await postShorten(a, body)).json<{ id: number }>();
      const db = a.service.database.db;
      const unfolded = async () =>
        (await db.selectFrom('visit_unfolded').select('segment_id').where('url_id', '=', id).execute()).length;
      for (let round = 0; round < 20; round++) {
        const visit = chromeVisit(id, Date.now() - round);
        expect(await a.service.visits.repository.writeBatch(visitBatch(`fold-${body.code}-${round}`, [visit]))).toBe(
          true,
        );
        expect(await unfolded()).toBeGreaterThan(0);
        const other = b.service.visits.fold();
        await a.service.visits.fold();
        expect(await unfolded(), `round ${round}`).toBe(0);
        await other;
      }
      const { count, recount, stored } = await rollupsAndRecount(db, id);
      expect(count).toBe(20);
      expect(stored).toEqual(recount);
    },
  );

  it.skipIf(skip)('create with both limits: the read view, GET /urls and url.created carry them', async () => {
    const expires = '2099-01-31T12:00:00.5Z';
    const body = { ...newMapping(nextCode), expires_at: expires, max_visits: 3 };
    const response = await postShorten(a, body);
    expect(response.statusCode, response.body).toBe(201);
    expect(response.json()).toEqual({ id: expect.any(Number), ...body });
    expect(await findListed(a, body.code)).toMatchObject({ expires_at: expires, max_visits: 3 });

    const link = await a.inject({
      method: 'POST',
      url: '/api/v1/links',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ url: TARGET, expires_at: '2099-01-31T13:00:00+01:00', max_visits: 1 }),
    });
    expect(link.statusCode, link.body).toBe(201);
    expect(link.json()).toMatchObject({ url: TARGET, expires_at: '2099-01-31T12:00:00Z', max_visits: 1 });

    // Without them: exactly the spec's five fields, and the redirect as always.
    const plain = newMapping(nextCode);
    const created = await postShorten(a, plain);
    expect(created.json()).toEqual({ id: expect.any(Number), ...plain });
    expect(await findListed(a, plain.code)).toEqual({ id: expect.any(Number), ...plain });
    expectRedirect(await get(a, plain.code), plain.url);

    const db = a.service.database.db as unknown as Kysely<EventTables>;
    const envelopes = (await db.selectFrom('event_log').select('envelope').execute()).map(
      (r) => JSON.parse(r.envelope) as { event_type: string; payload: Record<string, unknown> },
    );
    const createdOf = (code: string) =>
      envelopes.find((e) => e.event_type === 'url.created' && e.payload.code === code)?.payload;
    expect(createdOf(body.code)).toMatchObject({ expires_at: expires, max_visits: 3 });
    expect(createdOf(plain.code)).toMatchObject({ expires_at: null, max_visits: null });
  });

  it.skipIf(skip)('refuses bad limits with a 422 {detail} naming the field, and creates nothing', async () => {
    const refused = async (extra: Record<string, unknown>, field: string, detail?: RegExp) => {
      const body = { ...newMapping(nextCode), ...extra };
      const text = expectValidationError(await postShorten(a, body), field);
      if (detail) expect(text).toMatch(detail);
      expectError(await get(a, body.code), 404);
    };
    await refused({ expires_at: '2020-01-01T00:00:00Z' }, 'expires_at', /must be in the future/);
    await refused({ expires_at: 'tomorrow' }, 'expires_at', /valid date-time/);
    await refused({ expires_at: '2099-02-30T00:00:00Z' }, 'expires_at');
    await refused({ expires_at: 1234 }, 'expires_at');
    await refused({ max_visits: 0 }, 'max_visits', /at least 1/);
    await refused({ max_visits: -5 }, 'max_visits');
    await refused({ max_visits: 1.5 }, 'max_visits', /integer/);
    await refused({ max_visits: '10' }, 'max_visits', /integer/);
    const link = await a.inject({
      method: 'POST',
      url: '/api/v1/links',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ url: TARGET, expires_at: inSeconds(-60) }),
    });
    expectValidationError(link, 'expires_at');

    const body = newMapping(nextCode);
    await postShorten(a, body);
    expectValidationError(await patchMapping(a, body.code, { max_visits: 0 }), 'max_visits');
    expectValidationError(await patchMapping(a, body.code, { expires_at: 'soon' }), 'expires_at');
    expect(await findListed(a, body.code)).toEqual({ id: expect.any(Number), ...body });
  });

  it.skipIf(skip)('after max_visits answers 410 and counts nothing; PATCH raises and clears the limit', async () => {
    const body = { ...newMapping(nextCode), max_visits: 3 };
    await postShorten(a, body);
    // HEAD reserves nothing.
    expectRedirect(await get(a, body.code, 'HEAD'), body.url);
    for (const app of [a, b, a]) expectRedirect(await get(app, body.code), body.url);
    const limit = 'This link has reached its limit of 3 visits.';
    for (const app of [a, b, b, a]) expectError(await get(app, body.code), 410, limit);
    expect((await get(b, body.code, 'HEAD')).statusCode).toBe(410);
    expect(await clicksOf(body.code)).toBe(3);
    expect(await visitsOf(body.code)).toBe(3);
    const [stopped] = await eventually(async () => {
      const events = await expiredEvents(body.code);
      expect(events).toHaveLength(1);
      return events;
    });
    expect(stopped).toMatchObject({ code: body.code, url: body.url, max_visits: 3, reason: 'max_visits' });

    // Raised on one instance: both answer the new visits (the other's cache follows the event).
    const raised = await patchMapping(a, body.code, { max_visits: 5 });
    expect(raised.statusCode, raised.body).toBe(200);
    expect(raised.json()).toMatchObject({ max_visits: 5, click_count: 3 });
    expectRedirect(await get(a, body.code), body.url);
    // The other instance knew the link as used up: it follows once the change's event arrives.
    await eventually(async () => expectRedirect(await get(b, body.code), body.url));
    expectError(await get(b, body.code), 410, 'This link has reached its limit of 5 visits.');
    expectError(await get(a, body.code), 410, 'This link has reached its limit of 5 visits.');
    expect(await clicksOf(body.code)).toBe(5);
    expect(await visitsOf(body.code)).toBe(5);
    // A second stop, a second event; never two for one stop.
    await eventually(async () => expect(await expiredEvents(body.code)).toHaveLength(2));

    // Cleared: answers again, as a link without limits reads.
    const cleared = await patchMapping(b, body.code, { max_visits: null });
    expect(cleared.statusCode, cleared.body).toBe(200);
    expect(cleared.json()).toEqual({ id: expect.any(Number), ...newMapping(() => body.code), click_count: 5 });
    expectRedirect(await get(b, body.code), body.url);
    // The other instance answers 410 from its cache (counting nothing) until the event arrives.
    await eventually(async () => expectRedirect(await get(a, body.code), body.url));
    expect(await clicksOf(body.code)).toBe(7);
    expect(await visitsOf(body.code)).toBe(7);
    expect(await expiredEvents(body.code)).toHaveLength(2);
  });

  it.skipIf(skip)(
    'a limit set on a link with clicks counts them; lowering it below stops the link at once',
    async () => {
      const body = newMapping(nextCode);
      await postShorten(a, body);
      for (let i = 0; i < 4; i++) expectRedirect(await get(a, body.code), body.url);
      await clicksOf(body.code);
      const set = await patchMapping(b, body.code, { max_visits: 5 });
      expect(set.json()).toMatchObject({ max_visits: 5, click_count: 4 });
      expectRedirect(await get(b, body.code), body.url);
      expectError(await get(b, body.code), 410, 'This link has reached its limit of 5 visits.');
      // The other instance, which had the link cached without a limit, answers from its cache
      // until the change's event arrives (counted), then 410.
      let stale = 0;
      await eventually(async () => {
        const response = await get(a, body.code);
        if (response.statusCode === 302) stale++;
        expectError(response, 410, 'This link has reached its limit of 5 visits.');
      });
      expect(await clicksOf(body.code)).toBe(5 + stale);
      expect(await visitsOf(body.code)).toBe(5 + stale);

      const other = newMapping(nextCode);
      await postShorten(a, other);
      for (let i = 0; i < 3; i++) expectRedirect(await get(a, other.code), other.url);
      await clicksOf(other.code);
      expect((await patchMapping(a, other.code, { max_visits: 2 })).statusCode).toBe(200);
      expectError(await get(a, other.code), 410, 'This link has reached its limit of 2 visits.');
      await eventually(async () =>
        expectError(await get(b, other.code), 410, 'This link has reached its limit of 2 visits.'),
      );
      expect(await clicksOf(other.code)).toBe(3);
      expect(await visitsOf(other.code)).toBe(3);
      const events = await eventually(async () => {
        const found = await expiredEvents(other.code);
        expect(found).toHaveLength(1);
        return found;
      });
      expect(events[0]).toMatchObject({ reason: 'max_visits', max_visits: 2 });
    },
  );

  it.skipIf(skip)('after expires_at answers 410 and counts nothing; PATCH moves and clears the expiry', async () => {
    const body = { ...newMapping(nextCode), expires_at: '2099-06-01T00:00:00Z' };
    await postShorten(a, body);
    expectRedirect(await get(a, body.code), body.url);
    expectRedirect(await get(b, body.code), body.url);
    // A PATCH may set a time already past: the link stops at once, on both instances.
    const past = '2021-03-04T05:06:07.25Z';
    const patched = await patchMapping(b, body.code, { expires_at: past });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({ expires_at: past });
    const gone = `This link expired at ${past}.`;
    expectError(await get(b, body.code), 410, gone);
    // The other instance answers from its cache until the change's event arrives (counted), then 410.
    let stale = 0;
    await eventually(async () => {
      const response = await get(a, body.code);
      if (response.statusCode === 302) stale++;
      expectError(response, 410, gone);
    });
    expect((await get(a, body.code, 'HEAD')).statusCode).toBe(410);
    expectError(await get(b, body.code), 410, gone);
    expect(await clicksOf(body.code)).toBe(2 + stale);
    expect(await visitsOf(body.code)).toBe(2 + stale);
    const [event] = await eventually(async () => {
      const found = await expiredEvents(body.code);
      expect(found).toHaveLength(1);
      return found;
    });
    expect(event).toMatchObject({ code: body.code, expires_at: past, reason: 'expired_at' });

    const cleared = await patchMapping(a, body.code, { expires_at: null });
    expect(cleared.json()).toEqual({ id: expect.any(Number), ...newMapping(() => body.code), click_count: 2 + stale });
    expectRedirect(await get(a, body.code), body.url);
    await eventually(async () => expectRedirect(await get(b, body.code), body.url));
    expect(await expiredEvents(body.code)).toHaveLength(1);
  });

  it.skipIf(skip)(
    'a link nobody visits gets its url.expired once when its time passes, with two instances sweeping',
    async () => {
      const codes: string[] = [];
      for (let i = 0; i < 20; i++) {
        const body = { ...newMapping(nextCode), expires_at: inSeconds(1 + (i % 3) * 0.4) };
        expect((await postShorten(i % 2 === 0 ? a : b, body)).statusCode).toBe(201);
        codes.push(body.code);
      }
      await eventually(
        async () => {
          const events = await expiredEvents();
          for (const code of codes) expect(events.filter((e) => e.code === code)).toHaveLength(1);
        },
        { timeoutMs: 15_000 },
      );
      for (const code of codes) expectError(await get(a, code), 410, /^This link expired at /);
      // Sweeps after them (both instances swept until a later link's event) found nothing more to say.
      const later = { ...newMapping(nextCode), expires_at: inSeconds(1) };
      await postShorten(a, later);
      await eventually(async () => expect(await expiredEvents(later.code)).toHaveLength(1), { timeoutMs: 15_000 });
      const events = await expiredEvents();
      for (const code of codes) expect(events.filter((e) => e.code === code)).toHaveLength(1);
      for (const event of events.filter((e) => codes.includes(e.code))) expect(event.reason).toBe('expired_at');
    },
  );
});
