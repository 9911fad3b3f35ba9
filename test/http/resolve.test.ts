import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { BACKENDS } from '../helpers/backends.js';
import {
  type CreateBody,
  codeMaker,
  createMapping,
  expectError,
  expectRedirect,
  expectValidationError,
  findListed,
  newMapping,
  postShorten,
  HTTP_TEST_ENV,
} from '../helpers/http.js';
import { storedClicks as storedClicksOf } from '../helpers/stored-clicks.js';

/** Spec §4.1 (resolve, rules 2–4), §8; design §2: clicks, HEAD, cache, Cache-Control. */
describe.each(BACKENDS)('GET /{code} on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  const code = codeMaker('res');
  const mapping = (overrides: Partial<CreateBody> = {}) => newMapping(code, overrides);
  const app = useTestApp(backend, HTTP_TEST_ENV);
  const configured = useTestApp(backend, { ...HTTP_TEST_ENV, REDIRECT_CACHE_CONTROL: 'public, max-age=300' });

  const get = (path: string) => app.inject({ method: 'GET', url: path });
  const head = (path: string) => app.inject({ method: 'HEAD', url: path });
  /** click_count as the database holds it, without this instance's buffered clicks. */
  const storedClicks = (value: string) => storedClicksOf(app.service.database.db, { code: value });

  describe('redirect', () => {
    test('302 with Location exactly the stored url, Cache-Control private, max-age=0, and no body', async () => {
      const created = await createMapping(app, mapping({ url: 'https://example.com/landing' }));
      const response = await get(`/${created.code}`);
      expectRedirect(response, 'https://example.com/landing');
      expect(response.headers['cache-control']).toBe('private, max-age=0');
      expect(response.headers['content-type']).toBeUndefined();
      expect(response.rawPayload.length).toBe(0);
    });

    test('the same answer when served from the cache', async () => {
      const created = await createMapping(app, mapping({ url: 'https://example.com/cached' }));
      for (let i = 0; i < 3; i++) {
        const response = await get(`/${created.code}`);
        expectRedirect(response, 'https://example.com/cached');
        expect(response.headers['cache-control']).toBe('private, max-age=0');
      }
    });

    test.each([
      'https://example.com/path?query=1&other=two#fragment',
      'https://example.com/?q=a%20b&x=%2F#sec-2',
      'http://example.com:8080/a/b/c.html',
      'https://example.com/?redirect=https%3A%2F%2Fother.example%2F',
      'HTTPS://EXAMPLE.COM/Case/Kept',
    ])('Location is exactly %s', async (url) => {
      const created = await createMapping(app, mapping({ url }));
      expectRedirect(await get(`/${created.code}`), url);
    });

    test('a non-ASCII url redirects to its punycode / percent-encoded form', async () => {
      const url = 'https://例え.jp/パス?q=ü#frag';
      const created = await createMapping(app, mapping({ url }));
      expect(created.url).toBe(url);
      const response = await get(`/${created.code}`);
      expectRedirect(response, 'https://xn--r8jz45g.jp/%E3%83%91%E3%82%B9?q=%C3%BC#frag');
      expect(response.headers.location).toMatch(/^[\x21-\x7e]+$/);
      expect(new URL(String(response.headers.location)).href).toBe(new URL(url).href);
    });

    test('a query string on the short URL does not change the answer', async () => {
      const created = await createMapping(app, mapping({ url: 'https://example.com/q' }));
      expectRedirect(await get(`/${created.code}?utm_source=x`), 'https://example.com/q');
    });

    test('Cache-Control is configurable (REDIRECT_CACHE_CONTROL)', async () => {
      const other = configured.app;
      const created = await createMapping(other, mapping({ url: 'https://example.com/conf' }));
      const response = await other.inject({ method: 'GET', url: `/${created.code}` });
      expectRedirect(response, 'https://example.com/conf');
      expect(response.headers['cache-control']).toBe('public, max-age=300');
    });

    test('a code is matched case-sensitively', async () => {
      await createMapping(app, mapping({ code: 'MiXeDcAsE', url: 'https://example.com/m' }));
      expectRedirect(await get('/MiXeDcAsE'), 'https://example.com/m');
      expectError(await get('/mixedcase'), 404);
      expectError(await get('/MIXEDCASE'), 404);
    });

    test('a percent-encoded code is decoded', async () => {
      await createMapping(app, mapping({ code: 'enc0ded1', url: 'https://example.com/enc' }));
      expectRedirect(await get('/%65nc0ded1'), 'https://example.com/enc');
    });
  });

  describe('unknown and invalid codes', () => {
    test('an unknown code → 404 {detail}, also when asked again (cached as unknown)', async () => {
      const first = expectError(await get('/unknown01'), 404);
      const second = expectError(await get('/unknown01'), 404);
      expect(second).toBe(first);
    });

    test.each([
      ['5 characters', 'abcd5'],
      ['11 characters', 'abcdefghij1'],
      ['a hyphen', 'abc-12'],
      ['an underscore', 'abc_12'],
      ['a dot', 'abc.12'],
      ['an encoded space', 'abc%2012'],
      ['an encoded accented letter', 'abcd%C3%A91'],
      ['an encoded hyphen', 'abc%2D12'],
    ])('%s (/%s) → 422 naming code', async (_what, path) => {
      expectValidationError(await get(`/${path}`), 'code');
    });

    test('a reserved word is served by its own route, never resolved as a code', async () => {
      expect((await get('/health')).statusCode).toBe(200);
      expectError(await get('/shorten'), 405);
    });
  });

  describe('a code created after being looked up as unknown', () => {
    test('resolves at once', async () => {
      const value = code();
      expectError(await get(`/${value}`), 404);
      expectError(await get(`/${value}`), 404);
      expect((await head(`/${value}`)).statusCode).toBe(404);
      await createMapping(app, mapping({ code: value, url: 'https://example.com/late' }));
      expectRedirect(await get(`/${value}`), 'https://example.com/late');
    });

    test('resolves at once when created while a lookup of it is under way', async () => {
      const value = code();
      const lookup = get(`/${value}`);
      const created = postShorten(app, mapping({ code: value, url: 'https://example.com/racing' }));
      const [lookedUp, made] = await Promise.all([lookup, created]);
      expect([302, 404]).toContain(lookedUp.statusCode);
      expect(made.statusCode).toBe(201);
      expectRedirect(await get(`/${value}`), 'https://example.com/racing');
    });
  });

  describe('HEAD', () => {
    test('answers like GET (302, Location, Cache-Control, no body) and does not count', async () => {
      const created = await createMapping(app, mapping({ url: 'https://example.com/head', click_count: 4 }));
      for (let i = 0; i < 3; i++) {
        const response = await head(`/${created.code}`);
        expect(response.statusCode).toBe(302);
        expect(response.headers.location).toBe('https://example.com/head');
        expect(response.headers['cache-control']).toBe('private, max-age=0');
        expect(response.body).toBe('');
      }
      expect((await findListed(app, created.code))?.click_count).toBe(4);
      await app.service.clicks.flush();
      expect(await storedClicks(created.code)).toBe(4);
      expect((await findListed(app, created.code))?.click_count).toBe(4);
    });

    test('unknown → 404, invalid → 422, with no body', async () => {
      const unknown = await head('/unknown02');
      expect(unknown.statusCode).toBe(404);
      expect(unknown.body).toBe('');
      const invalid = await head('/abc-12');
      expect(invalid.statusCode).toBe(422);
      expect(invalid.body).toBe('');
    });
  });

  describe('clicks', () => {
    test('each GET adds one, visible at once in GET /urls, and still right after a flush', async () => {
      const created = await createMapping(app, mapping({ click_count: 5 }));
      for (let i = 0; i < 3; i++) expect((await get(`/${created.code}`)).statusCode).toBe(302);
      expect((await findListed(app, created.code))?.click_count).toBe(8);

      await app.service.clicks.flush();
      expect(await storedClicks(created.code)).toBe(8);
      expect((await findListed(app, created.code))?.click_count).toBe(8);

      expect((await get(`/${created.code}`)).statusCode).toBe(302);
      expect((await findListed(app, created.code))?.click_count).toBe(9);
      await app.service.clicks.flush();
      await app.service.clicks.flush();
      expect(await storedClicks(created.code)).toBe(9);
      expect((await findListed(app, created.code))?.click_count).toBe(9);
    });

    test('folding the written clicks into the stored counts changes no count', async () => {
      const created = await createMapping(app, mapping({ click_count: 2 }));
      for (let i = 0; i < 3; i++) expect((await get(`/${created.code}`)).statusCode).toBe(302);
      await app.service.clicks.flush();
      await app.service.clicks.compact();
      const row = await app.service.database.db
        .selectFrom('url_mappings')
        .select('click_count')
        .where('id', '=', created.id)
        .executeTakeFirstOrThrow();
      expect(row.click_count).toBe(5);
      expect(await storedClicks(created.code)).toBe(5);
      expect((await findListed(app, created.code))?.click_count).toBe(5);

      expect((await get(`/${created.code}`)).statusCode).toBe(302);
      await app.service.clicks.compact();
      expect((await findListed(app, created.code))?.click_count).toBe(6);
      await app.service.clicks.flush();
      await app.service.clicks.compact();
      expect(await storedClicks(created.code)).toBe(6);
      expect((await findListed(app, created.code))?.click_count).toBe(6);
    });

    test('concurrent GETs on a code not yet cached all redirect and all count', async () => {
      const created = await createMapping(app, mapping({ url: 'https://example.com/burst' }));
      const responses = await Promise.all(Array.from({ length: 25 }, () => get(`/${created.code}`)));
      for (const response of responses) expectRedirect(response, 'https://example.com/burst');
      expect((await findListed(app, created.code))?.click_count).toBe(25);
      await app.service.clicks.flush();
      expect(await storedClicks(created.code)).toBe(25);
    });

    test('clicks on one code do not count on another', async () => {
      const a = await createMapping(app, mapping());
      const b = await createMapping(app, mapping({ click_count: 2 }));
      await get(`/${a.code}`);
      await get(`/${a.code}`);
      expect((await findListed(app, a.code))?.click_count).toBe(2);
      expect((await findListed(app, b.code))?.click_count).toBe(2);
    });

    test('an unknown or invalid code counts nothing anywhere', async () => {
      const before = (await app.inject({ method: 'GET', url: '/urls' })).json<{ click_count: number }[]>();
      await get('/unknown03');
      await get('/abc-12');
      await app.service.clicks.flush();
      const after = (await app.inject({ method: 'GET', url: '/urls' })).json<{ click_count: number }[]>();
      expect(after).toEqual(before);
    });
  });
});
