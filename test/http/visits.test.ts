import { beforeAll, describe, expect, it } from 'vitest';
import { adminEnv, useTestApp } from '../helpers/app.js';
import { AUTH_TEST_ENV, jsonPost, metricValue, type Session, signUp } from '../helpers/auth.js';
import { BACKENDS } from '../helpers/backends.js';
import { codeMaker, expectError, nextLink, type ReadBody } from '../helpers/http.js';
import { storedClicks } from '../helpers/stored-clicks.js';
import {
  CHROME_WINDOWS,
  chromeVisit,
  GOOGLEBOT,
  REFERRERS,
  rollupsAndRecount,
  SAFARI_IPAD,
  SAFARI_IPHONE,
  USER_AGENTS,
  visitRows,
  visitBatch,
  visitTablesText,
} from '../helpers/visits.js';

const ADMIN = { username: 'visits_admin', email: 'visits_admin@example.com', password: 'admin password 1' };
const ENV = { ...AUTH_TEST_ENV, ...adminEnv(ADMIN), VISIT_COUNTRY_HEADER: 'CF-IPCountry' };

/** Issue 15 items 1 and 2: visits recorded on redirect, their statistics and their pages. */
describe.each(BACKENDS)('visits and statistics on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  const code = codeMaker('vis');
  const t = useTestApp(backend, ENV, { accounts: true, admin: ADMIN });
  let owner: { user: { id: number }; session: Session };
  let other: { user: { id: number }; session: Session };

  beforeAll(async () => {
    if (!backend.available) return;
    owner = await signUp(t.app, 'vowner');
    other = await signUp(t.app, 'vother');
  });

  const createLink = async (session: Session = owner.session) => {
    const response = await jsonPost(
      t.app,
      '/api/v1/links',
      { url: 'https://example.com/t', code: code() },
      session.headers,
    );
    expect(response.statusCode, response.body).toBe(201);
    return response.json<ReadBody & { id: number }>();
  };
  const visit = (linkCode: string, headers: Record<string, string | undefined>) =>
    t.app.inject({
      method: 'GET',
      url: `/${linkCode}`,
      headers: Object.fromEntries(Object.entries(headers).filter(([, v]) => v !== undefined)) as Record<string, string>,
    });
  const flush = async () => {
    await t.service.visits.buffer!.flush();
    await t.service.visits.merge();
    await t.service.clicks.flush();
  };
  const get = (url: string, session?: Session, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'GET', url, headers: { ...(session ? { cookie: session.cookie } : {}), ...headers } });

  test('a redirect records every field; no address and no full User-Agent is stored anywhere', async () => {
    const link = await createLink();
    expect(
      (
        await visit(link.code, {
          'user-agent': CHROME_WINDOWS,
          referer: 'https://News.Example.com/x?y=z',
          'cf-ipcountry': 'de',
        })
      ).statusCode,
    ).toBe(302);
    expect((await visit(link.code, { 'user-agent': GOOGLEBOT, 'cf-ipcountry': 'XX' })).statusCode).toBe(302);
    expect((await visit(link.code, { 'user-agent': SAFARI_IPHONE, referer: 'android-app://x' })).statusCode).toBe(302);
    expect((await visit(link.code, { 'user-agent': SAFARI_IPAD })).statusCode).toBe(302);
    expect((await t.app.inject({ method: 'HEAD', url: `/${link.code}` })).statusCode).toBe(302); // not a visit
    await flush();
    const rows = await visitRows(t.service.database.db, link.code);
    expect(
      rows.map(({ id: _id, url_id: _u, visited_at_ms: at, ...rest }) => ({
        ...rest,
        recent: Date.now() - at < 60_000,
      })),
    ).toEqual([
      {
        referrer_host: 'news.example.com',
        browser: 'Chrome',
        os: 'Windows',
        device: 'desktop',
        bot: 0,
        country: 'DE',
        recent: true,
      },
      { referrer_host: null, browser: null, os: null, device: 'bot', bot: 1, country: null, recent: true },
      {
        referrer_host: null,
        browser: 'Mobile Safari',
        os: 'iOS',
        device: 'mobile',
        bot: 0,
        country: null,
        recent: true,
      },
      {
        referrer_host: null,
        browser: 'Mobile Safari',
        os: 'iOS',
        device: 'tablet',
        bot: 0,
        country: null,
        recent: true,
      },
    ]);
    const stored = await visitTablesText(t.service.database.db);
    expect(stored).not.toContain('127.0.0.1');
    for (const agent of [CHROME_WINDOWS, GOOGLEBOT, SAFARI_IPHONE]) expect(stored).not.toContain(agent);
    expect(stored).not.toContain('/x?y=z');
    expect(await storedClicks(t.service.database.db, { code: link.code })).toBe(4); // COUNT_BOTS defaults to true
  });

  test('the journal gauges: visits flushed and not merged yet, the oldest row’s age; 0 once merged', async () => {
    const link = await createLink();
    const gauges = async () => ({
      visits: await metricValue(t.app, 'visit_journal_visits'),
      age: await metricValue(t.app, 'visit_journal_oldest_age_seconds'),
    });
    // The service's own merge runs every 5 s: one may take the row between the flush and the
    // scrape (then the gauges read 0), so a few tries.
    let waiting = { visits: 0, age: 0 };
    for (let tries = 0; tries < 5 && waiting.visits === 0; tries++) {
      for (let v = 0; v < 3; v++)
        expect((await visit(link.code, { 'user-agent': CHROME_WINDOWS })).statusCode).toBe(302);
      await t.service.visits.buffer!.flush();
      waiting = await gauges();
    }
    expect(waiting.visits).toBeGreaterThanOrEqual(3);
    expect(waiting.age).toBeGreaterThanOrEqual(0);
    expect(waiting.age).toBeLessThan(60);
    await t.service.visits.merge();
    expect(await gauges()).toEqual({ visits: 0, age: 0 });
  });

  test('stats: totals, a series with zeros, the top lists; owner and administrators only', async () => {
    const link = await createLink();
    for (let i = 0; i < 12; i++) {
      await visit(link.code, {
        'user-agent': USER_AGENTS[i % USER_AGENTS.length],
        referer: REFERRERS[i % REFERRERS.length],
        'cf-ipcountry': i % 3 === 0 ? 'FR' : 'us',
      });
    }
    await flush();
    const today = Math.floor(Date.now() / 86_400_000) * 86_400_000;
    const to = new Date(today + 86_400_000).toISOString();
    const from = new Date(today - 3 * 86_400_000).toISOString();
    const url = `/api/v1/links/${link.code}/stats?from=${from}&to=${to}&interval=day&top=3`;
    const response = await get(url, owner.session);
    expect(response.statusCode, response.body).toBe(200);
    const stats = response.json();
    expect(stats).toMatchObject({ code: link.code, from, to, interval: 'day' });
    // Bots: Googlebot, curl, and light-my-request's default User-Agent (sent when none is given).
    const { unique_visitors: unique, ...counts } = stats.totals;
    expect(counts).toEqual({ visits: 12, bots: 6, humans: 6 });
    // Six User-Agents from one address: the sketch's estimate (two of 512 registers may coincide).
    expect(unique).toBeGreaterThanOrEqual(5);
    expect(unique).toBeLessThanOrEqual(6);
    expect(stats.series.length).toBe(4);
    expect(stats.series.reduce((n: number, s: { visits: number }) => n + s.visits, 0)).toBe(12);
    expect(stats.series.filter((s: { visits: number }) => s.visits === 0).length).toBe(3);
    expect(stats.top.countries).toEqual([
      { value: 'US', visits: 8 },
      { value: 'FR', visits: 4 },
    ]);
    expect(stats.top.referrers).toEqual([
      { value: null, visits: 6 },
      { value: 'blog.example.org', visits: 3 },
      { value: 'news.example.com', visits: 3 },
    ]);
    expect(stats.top.devices[0]).toEqual({ value: 'bot', visits: 6 });
    expect(stats.top.browsers.length).toBe(3);
    expect(Object.keys(stats.top).sort()).toEqual(['browsers', 'countries', 'devices', 'os', 'referrers']);

    const hourly = (
      await get(`/api/v1/links/${link.code}/stats?interval=hour&from=${from}&to=${to}`, owner.session)
    ).json();
    expect(hourly.series.length).toBe(4 * 24);
    const weekly = (await get(`/api/v1/links/${link.code}/stats?interval=week`, owner.session)).json();
    expect(new Date(weekly.series[0].start).getUTCDay()).toBe(1);
    expect(weekly.totals.visits).toBe(12);

    expect((await get(url, t.admin)).statusCode).toBe(200);
    expectError(await get(url), 401, 'Not authenticated');
    expectError(await get(url, other.session), 404, 'URL mapping not found');
    expectError(await get(`/api/v1/links/nosuch1/stats`, owner.session), 404);
    expectError(await get(`/api/v1/links/${link.code}/stats?interval=month`, owner.session), 422);
    expectError(await get(`/api/v1/links/${link.code}/stats?from=${to}&to=${from}`, owner.session), 422);
    expectError(await get(`/api/v1/links/${link.code}/stats?top=51`, owner.session), 422);
  });

  test('visits: pages newest first with a cursor and a Link header; CSV, paged and streamed', async () => {
    const link = await createLink();
    for (let i = 0; i < 5; i++)
      await visit(link.code, { 'user-agent': USER_AGENTS[i], referer: 'https://a.example/,"x"' });
    await flush();
    const first = await get(`/api/v1/links/${link.code}/visits?limit=2`, owner.session);
    expect(first.statusCode, first.body).toBe(200);
    const page = first.json();
    expect(page.items).toHaveLength(2);
    expect(Object.keys(page.items[0]).sort()).toEqual([
      'bot',
      'browser',
      'country',
      'device',
      'os',
      'referrer_host',
      'visited_at',
    ]);
    expect(page.next_cursor).toEqual(expect.any(String));
    const next = nextLink(first)!;
    expect(next).toContain(`/api/v1/links/${link.code}/visits?limit=2&cursor=`);
    const all = [...page.items];
    let cursor: string | null = page.next_cursor;
    while (cursor !== null) {
      const more = (await get(`/api/v1/links/${link.code}/visits?limit=2&cursor=${cursor}`, owner.session)).json();
      all.push(...more.items);
      cursor = more.next_cursor;
    }
    expect(all).toHaveLength(5);
    const times = all.map((v: { visited_at: string }) => v.visited_at);
    expect([...times].sort().reverse()).toEqual(times);
    expect(all.map((v: { browser: string | null }) => v.browser).reverse()).toEqual([
      'Chrome',
      'Mobile Safari',
      'Mobile Safari',
      null,
      null,
    ]);

    const csv = await get(`/api/v1/links/${link.code}/visits`, owner.session, { accept: 'text/csv' });
    expect(csv.statusCode).toBe(200);
    expect(csv.headers['content-type']).toMatch(/^text\/csv/);
    const lines = csv.body.trimEnd().split('\n');
    expect(lines[0]).toBe('visited_at,referrer_host,browser,os,device,bot,country');
    expect(lines).toHaveLength(6);
    expect(lines[5]).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z,a\.example,Chrome,Windows,desktop,false,$/);
    const paged = await get(`/api/v1/links/${link.code}/visits?limit=2`, owner.session, { accept: 'text/csv' });
    expect(paged.body.trimEnd().split('\n')).toHaveLength(3);
    expect(nextLink(paged)).toBeDefined();

    expectError(await get(`/api/v1/links/${link.code}/visits`, other.session, { accept: 'text/csv' }), 404);
    expectError(await get(`/api/v1/links/${link.code}/visits`), 401);
    expect((await get(`/api/v1/links/${link.code}/visits`, t.admin)).json().items).toHaveLength(5);
    expectError(await get(`/api/v1/links/${link.code}/visits?cursor=bad`, owner.session), 422);
    expectError(await get(`/api/v1/links/${link.code}/visits?limit=1001`, owner.session), 422);
  });

  test('rollups equal a recount of the raw rows after 300 concurrent redirects', async () => {
    const link = await createLink();
    await Promise.all(
      Array.from({ length: 300 }, (_, i) =>
        visit(link.code, {
          'user-agent': USER_AGENTS[i % USER_AGENTS.length],
          referer: REFERRERS[i % 4],
          'cf-ipcountry': ['DE', 'FR', 'US'][i % 3],
        }),
      ),
    );
    await flush();
    const { count, recount, stored } = await rollupsAndRecount(t.service.database.db, link.id);
    expect(count).toBe(300);
    expect(stored).toEqual(recount);
  });

  test('a day keeps 100 values per dimension, the rest as (other), across batches; totals stay exact', async () => {
    const link = await createLink();
    const now = Date.now();
    const record = (i: number) => ({
      urlId: link.id,
      visitedAt: now - (i % 3),
      referrerHost: `r${i}.example`,
      browser: 'Chrome',
      os: null,
      device: 'desktop' as const,
      bot: false,
      country: null,
    });
    const repository = t.service.visits.repository;
    // Two batches: values 0-79 (and 0-9 again) first, then 80-149.
    const first = Array.from({ length: 90 }, (_, i) => record(i % 80));
    const second = Array.from({ length: 70 }, (_, i) => record(80 + i));
    await repository.writeBatch(visitBatch(`cap1-${link.code}`, first));
    await repository.writeBatch(visitBatch(`cap2-${link.code}`, second));
    const stats = (await get(`/api/v1/links/${link.code}/stats?top=50`, owner.session)).json();
    expect(stats.totals.visits).toBe(160);
    expect(stats.top.referrers[0]).toEqual({ value: '(other)', visits: 50 });
    expect(stats.top.referrers.slice(1, 11).map((e: { visits: number }) => e.visits)).toEqual(new Array(10).fill(2));
    expect(stats.top.browsers).toEqual([{ value: 'Chrome', visits: 160 }]);
  });

  test('retention deletes old visits and the rollups of their days, and keeps the rest', async () => {
    const link = await createLink();
    const repository = t.service.visits.repository;
    const old = Date.now() - 400 * 86_400_000;
    const record = (visitedAt: number) => chromeVisit(link.id, visitedAt);
    await repository.writeBatch(visitBatch(`old-${link.code}`, [record(old), record(old + 1000)], [1]));
    await repository.writeBatch(visitBatch(`new-${link.code}`, [record(Date.now())]));
    expect(await repository.writeBatch(visitBatch(`new-${link.code}`, [record(Date.now())]))).toBe(false);
    await repository.daySalt(Math.floor(old / 86_400_000));
    expect(await t.service.visits.prune()).toBeGreaterThanOrEqual(2);
    const db = t.service.database.db;
    expect(await visitRows(db, link.code)).toHaveLength(1);
    const { recount, stored } = await rollupsAndRecount(db, link.id);
    expect(stored).toEqual(recount);
    // Every segment left, folded now, is listed by link once; the deleted ones' entries went with them.
    const listed = await db
      .selectFrom('visit_link_segments')
      .select('segment_id')
      .where('url_id', '=', link.id)
      .orderBy('segment_id')
      .execute();
    const kept = await db
      .selectFrom('visit_segments')
      .select('id')
      .where('url_id', '=', link.id)
      .orderBy('id')
      .execute();
    expect(listed.map((row) => Number(row.segment_id))).toEqual(kept.map((row) => Number(row.id)));
    expect(
      await db
        .selectFrom('visit_salts')
        .selectAll()
        .where('day', '<', Math.floor(old / 86_400_000) + 1)
        .execute(),
    ).toEqual([]);
    const stats = (
      await get(
        `/api/v1/links/${link.code}/stats?from=${new Date(old - 86_400_000).toISOString()}&interval=week`,
        owner.session,
      )
    ).json();
    expect(stats.totals.visits).toBe(1);
  });
});

describe.each(BACKENDS)('COUNT_BOTS and VISIT_RECORDING on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  const code = codeMaker('cbt');
  const noBots = useTestApp(backend, { COUNT_BOTS: 'false' });
  const noVisits = useTestApp(backend, { VISIT_RECORDING: 'false' });

  test('COUNT_BOTS=false: a bot is recorded as a visit but not counted as a click', async () => {
    const value = code();
    expect((await jsonPost(noBots.app, '/api/v1/links', { url: 'https://example.com/', code: value })).statusCode).toBe(
      201,
    );
    await noBots.app.inject({ method: 'GET', url: `/${value}`, headers: { 'user-agent': GOOGLEBOT } });
    await noBots.app.inject({ method: 'GET', url: `/${value}`, headers: { 'user-agent': CHROME_WINDOWS } });
    await noBots.service.visits.buffer!.flush();
    await noBots.service.visits.merge();
    await noBots.service.clicks.flush();
    expect(await storedClicks(noBots.service.database.db, { code: value })).toBe(1);
    expect((await visitRows(noBots.service.database.db, value)).map((v) => v.bot)).toEqual([1, 0]);
  });

  test('VISIT_RECORDING=false: clicks counted, no visit recorded', async () => {
    const value = code();
    expect(noVisits.service.visits.buffer).toBeUndefined();
    expect(
      (await jsonPost(noVisits.app, '/api/v1/links', { url: 'https://example.com/', code: value })).statusCode,
    ).toBe(201);
    await noVisits.app.inject({ method: 'GET', url: `/${value}`, headers: { 'user-agent': GOOGLEBOT } });
    await noVisits.service.clicks.flush();
    expect(await storedClicks(noVisits.service.database.db, { code: value })).toBe(1);
    expect(await visitRows(noVisits.service.database.db, value)).toEqual([]);
  });
});
