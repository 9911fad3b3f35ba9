/**
 * Issue 15 item 4: `POST /api/v1/links/import` and `GET /api/v1/links/export` on both backends,
 * through the whole service (real database, the embedded bus's log as the outbox).
 */
import { describe, expect, it } from 'vitest';
import { startTestApp, useTestApp } from '../helpers/app.js';
import { signUp } from '../helpers/auth.js';
import { BACKENDS, sqlite } from '../helpers/backends.js';
import { expectError, postShorten } from '../helpers/http.js';
import { createdPayloads, exportJson, importLinks, importReport, storedLinks } from '../helpers/link-transfer.js';
import { createdInLog } from '../helpers/outbox-census.js';
import type { ImportReport, RowOutcome } from '../../src/domain/link-transfer.js';

const ADMIN = { username: 'xfer_admin', email: 'xfer_admin@example.com', password: 'admin password 1' };

/** The rows of the mixed file, and the report they must give (with `taken` already in the database). */
function mixedFile(p: string, taken: string) {
  const rows: Record<string, unknown>[] = [
    { code: `${p}good1`, url: 'https://example.com/1', created_at: '2021-03-04T05:06:07Z', click_count: 42 },
    { code: `${p}good2`, url: 'https://example.com/2' },
    { code: taken, url: 'https://example.com/taken' },
    { code: `${p}good1`, url: 'https://example.com/again' },
    { code: 'ab', url: 'https://example.com/short' },
    { code: 'health', url: 'https://example.com/reserved' },
    { code: `${p}badurl`, url: 'javascript:alert(1)' },
    { code: `${p}nourl` },
    { code: `${p}date`, url: 'https://example.com/d', created_at: 'yesterday' },
    { code: `${p}clicks`, url: 'https://example.com/c', click_count: -1 },
    { code: `${p}extra`, url: 'https://example.com/e', owner: 3 },
    { code: `${p}good3`, url: 'https://example.com/3?a=1,b="2"', click_count: '7' },
    { code: `${p}limit`, url: 'https://example.com/l', expires_at: '2031-02-03T04:05:06+01:00', max_visits: 5 },
    { code: `${p}visits`, url: 'https://example.com/v', max_visits: 0 },
    { code: `${p}expiry`, url: 'https://example.com/x', expires_at: 'soon' },
  ];
  const report: RowOutcome[] = [
    { row: 1, code: `${p}good1`, status: 'created' },
    { row: 2, code: `${p}good2`, status: 'created' },
    { row: 3, code: taken, status: 'taken', detail: 'the code is taken' },
    { row: 4, code: `${p}good1`, status: 'taken', detail: 'the code is taken by row 1 of this file' },
    { row: 5, code: 'ab', status: 'refused', detail: "'code' must be 6 to 10 letters and digits" },
    { row: 6, code: 'health', status: 'refused', detail: "'code' is reserved" },
    { row: 7, code: `${p}badurl`, status: 'refused', detail: "'url' scheme must be one of http, https" },
    { row: 8, code: `${p}nourl`, status: 'refused', detail: "'url' is required" },
    { row: 9, code: `${p}date`, status: 'refused', detail: "'created_at' must be an RFC 3339 date-time" },
    { row: 10, code: `${p}clicks`, status: 'refused', detail: "'click_count' must be an integer >= 0" },
    {
      row: 11,
      code: `${p}extra`,
      status: 'refused',
      detail: "unknown field 'owner' (known: code, url, created_at, click_count, expires_at, max_visits)",
    },
    { row: 12, code: `${p}good3`, status: 'created' },
    { row: 13, code: `${p}limit`, status: 'created' },
    {
      row: 14,
      code: `${p}visits`,
      status: 'refused',
      detail: "'max_visits' must be an integer from 1 to 9007199254740991",
    },
    {
      row: 15,
      code: `${p}expiry`,
      status: 'refused',
      detail: expect.stringMatching(/^'expires_at' must be a valid date-time/),
    },
  ];
  return { rows, report, created: [`${p}good1`, `${p}good2`, `${p}good3`, `${p}limit`] };
}

const expectedReport = (report: RowOutcome[], dryRun: boolean): ImportReport => ({
  dry_run: dryRun,
  totals: {
    rows: report.length,
    created: report.filter((r) => r.status === 'created').length,
    taken: report.filter((r) => r.status === 'taken').length,
    refused: report.filter((r) => r.status === 'refused').length,
  },
  rows: report,
});

/** The rows as CSV with every column (empty cells for what a row leaves out). */
function asCsv(rows: Record<string, unknown>[]): string {
  const columns = ['code', 'url', 'created_at', 'click_count', 'expires_at', 'max_visits'];
  const cell = (v: unknown) => {
    if (v === undefined || v === null) return '';
    const text = String(v);
    return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  };
  // The CSV form of "an unknown field" is an unknown column, refused for the whole file: left out here.
  return `${columns.join(',')}\n${rows.map((r) => columns.map((c) => cell(r[c])).join(',')).join('\n')}\n`;
}

describe.each(BACKENDS)('link import and export on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  const t = useTestApp(backend, {}, { accounts: true, admin: ADMIN });
  const alice = t.user('xfalice');
  const bob = t.user('xfbob');
  /** A link already there, created anonymously (`POST /shorten`), whose code a file then takes. */
  const createAnonymously = async (code: string) => {
    const body = { code, url: 'https://example.com/first', created_at: '2020-01-01T00:00:00Z', click_count: 0 };
    expect((await postShorten(t.app, body)).statusCode).toBe(201);
  };

  test('a JSON file of good, taken and bad rows gets the exact report; each created link once, with its event', async () => {
    const taken = 'xjtaken1';
    await createAnonymously(taken);
    const { rows, report, created } = mixedFile('xj', taken);

    const dry = await importReport(t.app, alice.headers, rows, '?dry_run=true');
    expect(dry).toEqual(expectedReport(report, true));
    expect([...(await storedLinks(t.database.databaseUrl, 'xj')).keys()]).toEqual([taken]);

    expect(await importReport(t.app, alice.headers, rows)).toEqual(expectedReport(report, false));
    const stored = await storedLinks(t.database.databaseUrl, 'xj');
    expect([...stored.keys()].sort()).toEqual([...created, taken].sort());
    // Kept as given: created_at, click_count (a JSON string of digits too); the caller owns them.
    expect(stored.get('xjgood1')).toMatchObject({
      url: 'https://example.com/1',
      created_at: '2021-03-04T05:06:07Z',
      click_count: 42,
    });
    expect(stored.get('xjgood3')).toMatchObject({ url: 'https://example.com/3?a=1,b="2"', click_count: 7 });
    expect(stored.get(taken)).toMatchObject({ url: 'https://example.com/first', owner: null });
    const owners = new Set(created.map((code) => stored.get(code)!.owner));
    expect(owners.size).toBe(1);
    expect([...owners][0]).toEqual(expect.any(Number));
    const mine = await t.app.inject({ method: 'GET', url: '/urls?owner=me&limit=100', headers: alice.headers });
    expect(mine.json<{ code: string }[]>().map((r) => r.code)).toEqual(expect.arrayContaining(created));

    // One url.created each for the created links; none for the dry run or the rows not created.
    const events = await createdInLog(t.database.databaseUrl);
    for (const code of created) expect(events.get(code), code).toHaveLength(1);
    for (const code of ['xjbadurl', 'xjnourl', 'xjdate', 'xjclicks', 'xjextra']) expect(events.has(code)).toBe(false);
    expect(events.get(taken)).toHaveLength(1); // its own create's, not the import's
    // The event of an imported link is the event of a create: the same fields, its values.
    const payloads = await createdPayloads(t.database.databaseUrl);
    expect(Object.keys(payloads.get('xjgood1')!).sort()).toEqual(Object.keys(payloads.get(taken)!).sort());
    expect(payloads.get('xjlimit')).toMatchObject({
      code: 'xjlimit',
      url: 'https://example.com/l',
      click_count: 0,
      owner: stored.get('xjlimit')!.owner,
      expires_at: '2031-02-03T03:05:06Z',
      max_visits: 5,
    });

    // The same file again: everything it created is taken now.
    const again = await importReport(t.app, alice.headers, rows);
    expect(again.totals).toEqual({ rows: 15, created: 0, taken: 6, refused: 9 });
    // The limits are stored and exported as given (an expiry in the past too: the link answers 410).
    const exported = await exportJson(t.app, alice.headers);
    expect(exported.find((l) => l.code === 'xjlimit')).toMatchObject({
      expires_at: '2031-02-03T03:05:06Z',
      max_visits: 5,
    });
    expect((await createdInLog(t.database.databaseUrl)).get('xjgood1')).toHaveLength(1);
  });

  test('the same file as CSV gets the same report', async () => {
    const taken = 'xctaken1';
    await createAnonymously(taken);
    const { rows, report, created } = mixedFile('xc', taken);
    const csvRows = rows.filter((r) => !('owner' in r));
    const csvReport = report.filter((r) => r.row !== 11).map((r) => (r.row > 11 ? { ...r, row: r.row - 1 } : r));
    expect(await importReport(t.app, bob.headers, asCsv(csvRows), '?dry_run=true')).toEqual(
      expectedReport(csvReport, true),
    );
    expect((await storedLinks(t.database.databaseUrl, 'xc')).size).toBe(1);
    expect(await importReport(t.app, bob.headers, asCsv(csvRows))).toEqual(expectedReport(csvReport, false));
    const stored = await storedLinks(t.database.databaseUrl, 'xc');
    expect([...stored.keys()].sort()).toEqual([...created, taken].sort());
    expect(stored.get('xcgood1')).toMatchObject({ created_at: '2021-03-04T05:06:07Z', click_count: 42 });
    expect(stored.get('xcgood3')).toMatchObject({ url: 'https://example.com/3?a=1,b="2"', click_count: 7 });
    const events = await createdInLog(t.database.databaseUrl);
    for (const code of created) expect(events.get(code), code).toHaveLength(1);
  });

  test('a file that cannot be read as its format: 422 {detail}, nothing written', async () => {
    expectError(
      await importLinks(t.app, alice.headers, 'code,target\nxbad0001,https://e.com\n'),
      422,
      /unknown column 'target'/,
    );
    expectError(await importLinks(t.app, alice.headers, 'url\nhttps://e.com\n'), 422, /no 'code' column/);
    const broken = await t.app.inject({
      method: 'POST',
      url: '/api/v1/links/import',
      headers: { ...alice.headers, 'content-type': 'application/json' },
      payload: '[{"code": "xbad0002", "url": "https://e.com"}, {"code": ',
    });
    expectError(broken, 422, /JSON/);
    expectError(await importLinks(t.app, alice.headers, { code: 'xbad0003', url: 'https://e.com' }), 422, /array/);
    expect((await storedLinks(t.database.databaseUrl, 'xbad')).size).toBe(0);
    const xml = await t.app.inject({
      method: 'POST',
      url: '/api/v1/links/import',
      headers: { ...alice.headers, 'content-type': 'application/xml' },
      payload: '<links/>',
    });
    expectError(xml, 415);
  });

  test('a file saved with a byte order mark reads as without one (CSV and JSON)', async () => {
    const csv = await importReport(t.app, alice.headers, '\uFEFFcode,url\nxbom0001,https://example.com/b1\n');
    expect(csv.rows).toEqual([{ row: 1, code: 'xbom0001', status: 'created' }]);
    const json = await t.app.inject({
      method: 'POST',
      url: '/api/v1/links/import',
      headers: { ...alice.headers, 'content-type': 'application/json' },
      payload: Buffer.from('\uFEFF[{"code": "xbom0002", "url": "https://example.com/b2"}]', 'utf8'),
    });
    expect(json.statusCode, json.body).toBe(200);
    expect(json.json<ImportReport>().rows).toEqual([{ row: 1, code: 'xbom0002', status: 'created' }]);
  });

  test('authentication and CSRF as on the other /api/v1 routes', async () => {
    const body = [{ code: 'xauth001', url: 'https://example.com' }];
    expectError(await importLinks(t.app, {}, body), 401, 'Not authenticated');
    expectError(await importLinks(t.app, { cookie: alice.cookie }, body), 403);
    expectError(await t.app.inject({ method: 'GET', url: '/api/v1/links/export' }), 401, 'Not authenticated');
    expect((await storedLinks(t.database.databaseUrl, 'xauth')).size).toBe(0);
  });

  test('export: the caller’s own links, every link for an administrator; CSV and JSON', async () => {
    const carol = (await signUp(t.app, 'xfcarol')).session;
    const dave = (await signUp(t.app, 'xfdave')).session;
    await importReport(t.app, carol.headers, [
      { code: 'xocarol1', url: 'https://example.com/c1', created_at: '2022-01-01T00:00:00Z', click_count: 3 },
      { code: 'xocarol2', url: 'https://example.com/c2,"quoted"' },
    ]);
    await importReport(t.app, dave.headers, [{ code: 'xodave01', url: 'https://example.com/d1' }]);

    const carols = await exportJson(t.app, carol.headers);
    expect(carols.map((l) => l.code)).toEqual(['xocarol1', 'xocarol2']);
    expect(carols[0]).toEqual({
      code: 'xocarol1',
      url: 'https://example.com/c1',
      created_at: '2022-01-01T00:00:00Z',
      click_count: 3,
      expires_at: null,
      max_visits: null,
    });
    expect((await exportJson(t.app, dave.headers)).map((l) => l.code)).toEqual(['xodave01']);
    const all = (await exportJson(t.app, t.admin.headers)).map((l) => l.code);
    expect(all).toEqual(expect.arrayContaining(['xocarol1', 'xocarol2', 'xodave01']));
    // The admin's export holds every link, anonymous ones too (the first test's).
    if (all.includes('xjgood1')) expect(all).toContain('xjtaken1');

    const csv = await t.app.inject({
      method: 'GET',
      url: '/api/v1/links/export',
      headers: { ...carol.headers, accept: 'text/csv' },
    });
    expect(csv.statusCode).toBe(200);
    expect(csv.headers['content-type']).toMatch(/^text\/csv/);
    expect(csv.headers['content-disposition']).toBe('attachment; filename="links.csv"');
    expect(csv.body).toBe(
      'code,url,created_at,click_count,expires_at,max_visits\r\n' +
        'xocarol1,https://example.com/c1,2022-01-01T00:00:00Z,3,,\r\n' +
        `xocarol2,"https://example.com/c2,""quoted""",${carols[1]!.created_at},0,,\r\n`,
    );
  });

  test('export then import into an empty database gives the same links (CSV and JSON)', async () => {
    const erin = (await signUp(t.app, 'xferin')).session;
    const rows = Array.from({ length: 2500 }, (_, i) => ({
      code: `xr${String(i).padStart(6, '0')}`,
      url: `https://example.com/r/${i}?q=${i % 7 === 0 ? 'a,b' : 'x'}`,
      created_at: new Date(Date.UTC(2023, 0, 1) + i * 61_000).toISOString(),
      click_count: i * 3,
      ...(i % 5 === 0 ? { expires_at: new Date(Date.UTC(2020 + (i % 20), 5, 1)).toISOString() } : {}),
      ...(i % 3 === 0 ? { max_visits: i + 1 } : {}),
    }));
    expect((await importReport(t.app, erin.headers, rows)).totals.created).toBe(2500);
    const exported = await exportJson(t.app, erin.headers);
    expect(exported).toHaveLength(2500);
    const csv = (await t.app.inject({ method: 'GET', url: '/api/v1/links/export?format=csv', headers: erin.headers }))
      .body;

    for (const [format, body] of [
      ['json', exported],
      ['csv', csv],
    ] as const) {
      const fresh = await startTestApp(backend, {}, { accounts: true });
      try {
        const frank = (await signUp(fresh.app, 'xffrank')).session;
        const report = await importReport(fresh.app, frank.headers, body);
        expect(report.totals, format).toEqual({ rows: 2500, created: 2500, taken: 0, refused: 0 });
        expect(await exportJson(fresh.app, frank.headers), format).toEqual(exported);
      } finally {
        await fresh.close();
      }
    }
  });

  test('100,001 rows are refused as a whole: 413 {detail}, nothing written', async () => {
    const lines = Array.from({ length: 100_001 }, (_, i) => `xm${String(i).padStart(6, '0')},https://e.com/${i}`);
    const response = await importLinks(t.app, alice.headers, `code,url\n${lines.join('\n')}\n`);
    expectError(response, 413, /more than 100000 rows.*nothing was imported/);
    expect((await storedLinks(t.database.databaseUrl, 'xm')).size).toBe(0);
  });
});

describe('the import body limit', () => {
  const t = useTestApp(sqlite, { IMPORT_BODY_LIMIT: '4096' }, { accounts: true });
  const alice = t.user('xlalice');

  it('answers 413 {detail} past IMPORT_BODY_LIMIT, nothing written', async () => {
    const rows = Array.from({ length: 200 }, (_, i) => ({
      code: `xl${String(i).padStart(6, '0')}`,
      url: `https://e.com/${i}`,
    }));
    expectError(await importLinks(t.app, alice.headers, rows), 413, /larger than 4096 bytes.*nothing was imported/);
    expect((await storedLinks(t.database.databaseUrl, 'xl')).size).toBe(0);
    // Under it: imported.
    expect((await importReport(t.app, alice.headers, rows.slice(0, 20))).totals.created).toBe(20);
  });
});
