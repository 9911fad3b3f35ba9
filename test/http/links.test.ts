import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { adminEnv, useTestApp } from '../helpers/app.js';
import { AUTH_TEST_ENV, jsonPost, type Session, signUp } from '../helpers/auth.js';
import { BACKENDS, sqlite } from '../helpers/backends.js';
import {
  codeMaker,
  expectError,
  expectRedirect,
  newMapping,
  nextLink,
  postShorten,
  type ReadBody,
} from '../helpers/http.js';

const ADMIN = { username: 'links_admin', email: 'links_admin@example.com', password: 'admin password 1' };
const LINKS = '/api/v1/links';

/** Issue 14 items 3 and 4: `POST /api/v1/links`, and `GET /urls` with owner=me, q and sort. */
describe.each(BACKENDS)('POST /api/v1/links and finding links on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  const code = codeMaker('lnk');
  const t = useTestApp(backend, { ...AUTH_TEST_ENV, ...adminEnv(ADMIN) }, { accounts: true, admin: ADMIN });
  let carol: { user: { id: number }; session: Session };

  beforeAll(async () => {
    if (backend.available) carol = await signUp(t.app, 'carol');
  });

  const create = (body: unknown, session?: Session) => jsonPost(t.app, LINKS, body, session?.headers ?? {});
  const list = (query: string, session?: Session) =>
    t.app.inject({ method: 'GET', url: `/urls${query}`, headers: session ? { cookie: session.cookie } : {} });

  test('without a code: 201, a generated code of 7 letters and digits, created now, no clicks', async () => {
    const before = Date.now();
    const response = await create({ url: 'https://example.com/generated' });
    expect(response.statusCode, response.body).toBe(201);
    const body = response.json<ReadBody>();
    expect(body.code).toMatch(/^[a-zA-Z0-9]{7}$/);
    expect(body).toMatchObject({ url: 'https://example.com/generated', click_count: 0 });
    expect(body).not.toHaveProperty('owner');
    const createdAt = Date.parse(body.created_at);
    expect(createdAt).toBeGreaterThanOrEqual(before - 1000);
    expect(createdAt).toBeLessThanOrEqual(Date.now() + 1000);
    expectRedirect(await t.app.inject({ method: 'GET', url: `/${body.code}` }), 'https://example.com/generated');
  });

  test('with a code: that code; a taken one 409, a reserved one 422, a bad one 422', async () => {
    const value = code();
    const response = await create({ url: 'https://example.com/chosen', code: value });
    expect(response.statusCode, response.body).toBe(201);
    expect(response.json()).toMatchObject({ code: value, click_count: 0 });
    expectError(await create({ url: 'https://example.com/again', code: value }), 409, 'Code already exists');
    expectError(await create({ url: 'https://example.com/', code: 'SHORTEN' }), 422, 'Code is reserved');
    expectError(await create({ url: 'https://example.com/', code: 'metrics' }), 422, 'Code is reserved');
    expectError(await create({ url: 'https://example.com/', code: 'ab' }), 422);
    expectError(await create({ url: 'ftp://example.com/' }), 422);
    expectError(await create({ code: code() }), 422);
    expectError(await create({ url: 'https://example.com/', created_at: '2024-01-01T00:00:00Z' }), 422);
  });

  test('a signed-in caller owns the link; the session needs its CSRF header', async () => {
    const response = await create({ url: 'https://example.com/carol' }, carol.session);
    expect(response.statusCode, response.body).toBe(201);
    expect(response.json()).toMatchObject({ owner: carol.user.id });
    const noHeader = await jsonPost(t.app, LINKS, { url: 'https://example.com/' }, { cookie: carol.session.cookie });
    expectError(noHeader, 403, 'CSRF token missing from X-CSRF-Token header');
  });

  test('200 concurrent creates without a code: 200 distinct codes, no error', async () => {
    const responses = await Promise.all(
      Array.from({ length: 200 }, (_, i) => create({ url: `https://example.com/concurrent/${i}` })),
    );
    expect(responses.map((r) => r.statusCode)).toEqual(Array(200).fill(201));
    const codes = new Set(responses.map((r) => r.json<ReadBody>().code));
    expect(codes.size).toBe(200);
  });

  describe('GET /urls with owner=me, q and sort', () => {
    const mark = `Srch${backend.name}${process.pid}`;
    let made: ReadBody[] = [];

    beforeAll(async () => {
      if (!backend.available) return;
      made = [];
      const times = ['2024-03-01T00:00:00Z', '2024-01-01T00:00:00Z', '2024-02-01T00:00:00Z', '2024-04-01T00:00:00Z'];
      for (const [i, created_at] of times.entries()) {
        const body = newMapping(code, { url: `https://example.com/${mark}/${i}`, created_at, click_count: i * 3 });
        const response = await postShorten(t.app, body, carol.session.headers);
        expect(response.statusCode, response.body).toBe(201);
        made.push(response.json<ReadBody>());
      }
      // Someone else's link with the same mark: found by q, not by owner=me.
      const other = await postShorten(t.app, newMapping(code, { url: `https://example.com/${mark}/other` }));
      expect(other.statusCode).toBe(201);
      made.push(other.json<ReadBody>());
    });

    /** Every page, following the Link header from `first`. */
    async function pages(first: string, session?: Session): Promise<string[]> {
      const codes: string[] = [];
      let next: string | undefined = first;
      for (let n = 0; next !== undefined && n < 20; n++) {
        const response = await list(next.slice('/urls'.length), session);
        expect(response.statusCode, response.body).toBe(200);
        codes.push(...response.json<ReadBody[]>().map((r) => r.code));
        next = nextLink(response);
      }
      return codes;
    }

    test('q finds the code or the URL, ignoring case', async () => {
      const response = await list(`?q=${mark.toLowerCase()}`);
      expect(response.json<ReadBody[]>().map((r) => r.code)).toEqual(made.map((m) => m.code));
      const byCode = await list(`?q=${made[2]!.code.toUpperCase()}`);
      expect(byCode.json<ReadBody[]>().map((r) => r.code)).toContain(made[2]!.code);
      expect((await list(`?q=${mark}nothing`)).json()).toEqual([]);
      expectError(await list('?q='), 422);
    });

    test.each([
      ['-created_at', [3, 0, 2, 1]],
      ['created_at', [1, 2, 0, 3]],
      ['-click_count', [3, 2, 1, 0]],
      ['click_count', [0, 1, 2, 3]],
      ['-id', [3, 2, 1, 0]],
    ])('sort=%s with owner=me, one page at a time by the Link header', async (sort, order) => {
      const expected = order.map((i) => made[i]!.code);
      const first = `/urls?owner=me&q=${mark}&sort=${sort}&limit=1`;
      expect(await pages(first, carol.session)).toEqual(expected);
      const response = await list(`?owner=me&q=${mark}&sort=${sort}&limit=3`, carol.session);
      expect(response.headers.link).toBe(
        `</urls?limit=3&after=${made[order[2]!]!.id}&owner=me&q=${mark}&sort=${encodeURIComponent(sort)}>; rel="next"`,
      );
    });

    test('without the new parameters the list and its Link header are as before', async () => {
      const response = await list('?limit=2');
      const rows = response.json<ReadBody[]>();
      expect(response.headers.link).toBe(`</urls?limit=2&after=${rows[1]!.id}>; rel="next"`);
      expect(rows[0]!.id).toBeLessThan(rows[1]!.id);
      expectError(await list('?sort=url'), 422);
    });

    test('a just-created link is first newest first', async () => {
      const response = await create({ url: `https://example.com/${mark}/newest` }, carol.session);
      const created = response.json<ReadBody>();
      const first = await list('?owner=me&sort=-created_at&limit=1', carol.session);
      expect(first.json<ReadBody[]>()[0]!.code).toBe(created.code);
    });
  });
});

describe('CODE_LENGTH', () => {
  const t = useTestApp(sqlite, { CODE_LENGTH: '10', RATE_LIMIT_ENABLED: 'false' });

  it.skipIf(!sqlite.available)('sets the length of generated codes', async () => {
    const response = await jsonPost(t.app, LINKS, { url: 'https://example.com/long' });
    expect(response.statusCode, response.body).toBe(201);
    expect(response.json<ReadBody>().code).toMatch(/^[a-zA-Z0-9]{10}$/);
  });

  it.skipIf(!sqlite.available)('new links reach the SQLite search index in the background within seconds', async () => {
    const created = (await jsonPost(t.app, LINKS, { url: 'https://example.com/indexed-later' })).json<ReadBody>();
    const indexedUpTo = async () =>
      (
        await sql<{ n: number }>`SELECT indexed_up_to AS n FROM url_mappings_search_state`.execute(
          t.service.database.db,
        )
      ).rows[0]!.n;
    await eventually(async () => expect(await indexedUpTo()).toBeGreaterThanOrEqual(created.id), { timeoutMs: 5000 });
    const found = await t.app.inject({ method: 'GET', url: '/urls?q=INDEXED-later' });
    expect(found.json<ReadBody[]>().map((r) => r.code)).toEqual([created.code]);
  });
});
