import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { BACKENDS } from '../helpers/backends.js';
import {
  type CreateBody,
  codeMaker,
  createMapping,
  expectError,
  expectJsonContentType,
  expectRedirect,
  expectValidationError,
  findListed,
  newMapping,
  postShorten,
  HTTP_TEST_ENV,
} from '../helpers/http.js';

const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/;

/** Spec §2.1, §4.1 (shorten), §7, §8; design §2 "URL mappings" and "Errors". */
describe.each(BACKENDS)('POST /shorten on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  const code = codeMaker('shrt');
  const mapping = (overrides: Partial<CreateBody> = {}) => newMapping(code, overrides);
  const app = useTestApp(backend, HTTP_TEST_ENV);
  const configuredApp = useTestApp(backend, {
    ...HTTP_TEST_ENV,
    BODY_LIMIT: '300',
    URL_MAX_LENGTH: '40',
    URL_ALLOWED_SCHEMES: 'http,https,ftp',
  });

  describe('success', () => {
    test('answers 201 with the UrlMappingRead view of what was sent', async () => {
      const body = mapping({ url: 'https://example.com/some/page', click_count: 7 });
      const response = await postShorten(app, body);
      expect(response.statusCode, response.body).toBe(201);
      expectJsonContentType(response);
      const read = response.json<Record<string, unknown>>();
      expect(read).toEqual({ id: expect.any(Number), ...body });
      expect(Number.isInteger(read.id)).toBe(true);
      expect(Object.keys(read).sort()).toEqual(['click_count', 'code', 'created_at', 'id', 'url']);
    });

    test('assigns increasing ids', async () => {
      const a = await createMapping(app, mapping());
      const b = await createMapping(app, mapping());
      const c = await createMapping(app, mapping());
      expect(b.id).toBeGreaterThan(a.id);
      expect(c.id).toBeGreaterThan(b.id);
    });

    test('stores the mapping: it is listed and it redirects', async () => {
      const created = await createMapping(app, mapping({ url: 'https://example.org/stored', click_count: 3 }));
      expect(await findListed(app, created.code)).toEqual(created);
      expectRedirect(await app.inject({ method: 'GET', url: `/${created.code}` }), 'https://example.org/stored');
    });

    test('accepts application/json with a charset parameter', async () => {
      const body = mapping();
      const response = await app.inject({
        method: 'POST',
        url: '/shorten',
        headers: { 'content-type': 'application/json; charset=utf-8' },
        payload: JSON.stringify(body),
      });
      expect(response.statusCode, response.body).toBe(201);
      expect(response.json()).toEqual({ id: expect.any(Number), ...body });
    });

    test('keeps a large click_count exactly, up to the largest exact JSON integer', async () => {
      for (const clickCount of [2 ** 40, Number.MAX_SAFE_INTEGER]) {
        const created = await createMapping(app, mapping({ click_count: clickCount }));
        expect(created.click_count).toBe(clickCount);
        expect((await findListed(app, created.code))?.click_count).toBe(clickCount);
      }
    });
  });

  describe('created_at is returned as RFC 3339 UTC, the same instant', () => {
    test.each([
      ['2024-01-01T10:00:00+02:00', '2024-01-01T08:00:00Z'],
      ['2024-01-01T10:00:00Z', '2024-01-01T10:00:00Z'],
      ['2024-01-01T10:00:00z', '2024-01-01T10:00:00Z'],
      ['2024-01-01T10:00:00-05:30', '2024-01-01T15:30:00Z'],
      ['2024-01-01T00:30:00+01:00', '2023-12-31T23:30:00Z'],
      ['2024-01-01T10:00:00.123456Z', '2024-01-01T10:00:00.123456Z'],
      ['2024-01-01T10:00:00.123456+02:00', '2024-01-01T08:00:00.123456Z'],
      ['2024-01-01T10:00:00.5Z', '2024-01-01T10:00:00.5Z'],
      ['2024-01-01T10:00:00.000001Z', '2024-01-01T10:00:00.000001Z'],
      // Fractions are kept to the microsecond.
      ['2024-01-01T10:00:00.1234567Z', '2024-01-01T10:00:00.123456Z'],
      // A date-time without an offset is read as UTC.
      ['2024-01-01T10:00:00', '2024-01-01T10:00:00Z'],
      ['2024-02-29T12:00:00Z', '2024-02-29T12:00:00Z'],
      ['2000-02-29T23:59:59+00:00', '2000-02-29T23:59:59Z'],
    ])('%s → %s', async (given, expected) => {
      const created = await createMapping(app, mapping({ created_at: given }));
      expect(created.created_at).toBe(expected);
      expect(created.created_at).toMatch(RFC3339_UTC);
      expect(Date.parse(created.created_at)).toBe(
        Date.parse(/[zZ]|[+-]\d{2}:\d{2}$/.test(given) ? given : `${given}Z`),
      );
      // What the database kept is the same instant, in the same form.
      expect((await findListed(app, created.code))?.created_at).toBe(expected);
    });
  });

  describe('each field is required', () => {
    test.each(['code', 'url', 'created_at', 'click_count'] as const)('missing %s → 422 naming it', async (field) => {
      const body: Record<string, unknown> = { ...mapping() };
      delete body[field];
      expectValidationError(await postShorten(app, body), field);
    });

    test('an empty object → 422', async () => {
      expectError(await postShorten(app, {}), 422);
    });
  });

  describe('each field has its type', () => {
    test.each([
      ['code', 123456],
      ['code', null],
      ['code', true],
      ['code', ['abcdef1']],
      ['code', { value: 'abcdef1' }],
      ['url', 42],
      ['url', null],
      ['url', false],
      ['url', ['https://example.com']],
      ['created_at', 1704067200],
      ['created_at', null],
      ['created_at', true],
      ['click_count', '5'],
      ['click_count', 1.5],
      ['click_count', -1],
      ['click_count', null],
      ['click_count', true],
      ['click_count', 'abc'],
      ['click_count', [1]],
    ] as const)('%s = %j → 422 naming the field', async (field, value) => {
      expectValidationError(await postShorten(app, { ...mapping(), [field]: value }), field);
    });

    test('a click_count too large to be an exact JSON integer → 422', async () => {
      expectValidationError(await postShorten(app, mapping({ click_count: 2 ** 53 })), 'click_count');
      expectValidationError(await postShorten(app, mapping({ click_count: 1e20 })), 'click_count');
    });

    test('click_count 0 is the minimum and is accepted', async () => {
      expect((await createMapping(app, mapping({ click_count: 0 }))).click_count).toBe(0);
    });
  });

  describe('code: 6 to 10 letters and digits', () => {
    test.each([
      ['5 characters', 'abcd5'],
      ['11 characters', 'abcdefghij1'],
      ['empty', ''],
      ['a hyphen', 'abc-12'],
      ['a space', 'abc 12'],
      ['an underscore', 'abc_12'],
      ['a dot', 'abc.12'],
      ['a slash', 'abc/12'],
      ['an accented letter', 'abcdé1'],
      ['Cyrillic letters', 'абвгде'],
      ['full-width letters', 'ａｂｃｄｅｆ'],
      ['Arabic-Indic digits', '١٢٣٤٥٦'],
      ['an emoji', 'abcde😀'],
      ['a trailing newline', 'abcdef\n'],
    ])('%s (%j) → 422 naming code', async (_what, value) => {
      expectValidationError(await postShorten(app, mapping({ code: value })), 'code');
    });

    test('6 and 10 characters are accepted, letters and digits of both cases', async () => {
      for (const value of ['aZ3bY4', 'aZ3bY4cX5w', '123456', 'ABCDEFGHIJ']) {
        const created = await createMapping(app, mapping({ code: value }));
        expect(created.code).toBe(value);
      }
    });
  });

  describe('code is unique and case-sensitive', () => {
    test('a duplicate code → 409 "Code already exists", the original untouched', async () => {
      const first = await createMapping(app, mapping({ code: 'DupCode01', url: 'https://example.com/first' }));
      const again = await postShorten(app, mapping({ code: 'DupCode01', url: 'https://example.com/second' }));
      expectError(again, 409, 'Code already exists');
      expect(await findListed(app, 'DupCode01')).toEqual(first);
      expectRedirect(await app.inject({ method: 'GET', url: '/DupCode01' }), 'https://example.com/first');
    });

    test('the same code in another case is another mapping', async () => {
      const lower = await createMapping(app, mapping({ code: 'casecode1', url: 'https://example.com/lower' }));
      const upper = await createMapping(app, mapping({ code: 'CASECODE1', url: 'https://example.com/upper' }));
      const mixed = await createMapping(app, mapping({ code: 'CaseCode1', url: 'https://example.com/mixed' }));
      expect(new Set([lower.id, upper.id, mixed.id]).size).toBe(3);
      expectRedirect(await app.inject({ method: 'GET', url: '/casecode1' }), 'https://example.com/lower');
      expectRedirect(await app.inject({ method: 'GET', url: '/CASECODE1' }), 'https://example.com/upper');
      expectRedirect(await app.inject({ method: 'GET', url: '/CaseCode1' }), 'https://example.com/mixed');
    });
  });

  describe('reserved codes: the first path segments of the routes, case-insensitively', () => {
    test.each(['shorten', 'SHORTEN', 'ShOrTeN', 'metrics', 'Metrics', 'health', 'HEALTH', 'hEaLtH'])(
      '%s → 422 "Code is reserved"',
      async (value) => {
        expectError(await postShorten(app, mapping({ code: value })), 422, 'Code is reserved');
        expect(await findListed(app, value)).toBeUndefined();
      },
    );

    test('a code that only contains a route name is an ordinary code', async () => {
      for (const value of ['shorten1', 'Shorten2', 'metrics1', 'healthy', 'xhealth', 'urls12', 'docs12', 'healthz']) {
        expect((await createMapping(app, mapping({ code: value }))).code).toBe(value);
      }
    });

    test('every served path whose first segment could be a code reserves it (the list follows the routes)', async () => {
      const spec = (await app.inject({ method: 'GET', url: '/openapi.json' })).json<{
        paths: Record<string, unknown>;
      }>();
      const segments = Object.keys(spec.paths)
        .map((path) => path.split('/')[1] ?? '')
        .filter((segment) => /^[a-zA-Z0-9]{6,10}$/.test(segment));
      expect(segments).toEqual(expect.arrayContaining(['shorten', 'health', 'metrics']));
      for (const segment of segments) {
        expectError(await postShorten(app, mapping({ code: segment })), 422, 'Code is reserved');
        expectError(await postShorten(app, mapping({ code: segment.toUpperCase() })), 422, 'Code is reserved');
      }
    });
  });

  describe('url: an absolute http(s) URL, no whitespace or control characters, at most 2048 characters', () => {
    test.each([
      ['empty', ''],
      ['a relative path', '/relative/path'],
      ['a bare host', 'example.com'],
      ['a scheme-relative URL', '//example.com/x'],
      ['javascript:', 'javascript:alert(1)'],
      ['JavaScript: in mixed case', 'JavaScript:alert(1)'],
      ['ftp:', 'ftp://example.com/file'],
      ['mailto:', 'mailto:someone@example.com'],
      ['data:', 'data:text/html,<script>alert(1)</script>'],
      ['file:', 'file:///etc/passwd'],
      ['http: without //', 'http:example.com'],
      ['http: with one /', 'http:/example.com'],
      ['https: without a host', 'https://'],
      ['a space in the host', 'https://exa mple.com/'],
      ['a space in the path', 'https://example.com/a b'],
      ['a leading space', ' https://example.com/'],
      ['a trailing space', 'https://example.com/ '],
      ['a tab', 'https://example.com/a\tb'],
      ['a newline inside', 'https://example.com/a\nb'],
      ['a trailing newline', 'https://example.com/\n'],
      ['a carriage return', 'https://example.com/a\r\nSet-Cookie: x=1'],
      ['a NUL', 'https://example.com/a\u0000b'],
      ['a DEL', 'https://example.com/a\u007fb'],
      ['a C1 control', 'https://example.com/a\u0085b'],
      ['a no-break space', 'https://example.com/a\u00a0b'],
      ['a line separator', 'https://example.com/a\u2028b'],
    ])('%s → 422 naming url', async (_what, value) => {
      expectValidationError(await postShorten(app, mapping({ url: value })), 'url');
    });

    test.each([
      'http://example.com',
      'https://example.com/path?query=1&other=two#fragment',
      'HTTPS://EXAMPLE.COM/UPPER',
      'https://example.com:8443/port',
      'https://例え.jp/パス',
      'https://example.com/%20encoded%0Aescapes',
      'http://127.0.0.1:8080/',
      'http://[::1]/v6',
    ])('%s is accepted and kept as given', async (value) => {
      const created = await createMapping(app, mapping({ url: value }));
      expect(created.url).toBe(value);
      expect((await findListed(app, created.code))?.url).toBe(value);
    });

    test('exactly 2048 characters is accepted; 2049 → 422', async () => {
      const base = 'https://example.com/';
      const at = base + 'a'.repeat(2048 - base.length);
      expect(at).toHaveLength(2048);
      expect((await createMapping(app, mapping({ url: at }))).url).toBe(at);
      expectValidationError(await postShorten(app, mapping({ url: `${at}b` })), 'url');
    });

    test('the maximum length is configurable (URL_MAX_LENGTH)', async () => {
      const base = 'https://example.com/';
      const at = base + 'a'.repeat(40 - base.length);
      expect((await createMapping(configuredApp, mapping({ url: at }))).url).toBe(at);
      expectValidationError(await postShorten(configuredApp, mapping({ url: `${at}b` })), 'url');
    });

    test('other schemes are configurable (URL_ALLOWED_SCHEMES)', async () => {
      expect((await createMapping(configuredApp, mapping({ url: 'ftp://example.com/f' }))).url).toBe(
        'ftp://example.com/f',
      );
      expectValidationError(await postShorten(configuredApp, mapping({ url: 'javascript:alert(1)' })), 'url');
      expectValidationError(await postShorten(configuredApp, mapping({ url: 'mailto:a@example.com' })), 'url');
    });
  });

  describe('created_at: a valid date-time', () => {
    test.each([
      ['not a date', 'not a date'],
      ['empty', ''],
      ['a date only', '2024-01-01'],
      ['a time only', '10:00:00'],
      ['29 February of a common year', '2023-02-29T00:00:00Z'],
      ['month 13', '2024-13-01T00:00:00Z'],
      ['month 0', '2024-00-10T00:00:00Z'],
      ['day 32', '2024-01-32T00:00:00Z'],
      ['31 April', '2024-04-31T00:00:00Z'],
      ['hour 24', '2024-01-01T24:00:00Z'],
      ['minute 60', '2024-01-01T10:60:00Z'],
      ['an offset of 25 hours', '2024-01-01T10:00:00+25:00'],
      ['a US-style date', '01/02/2024 10:00'],
      ['trailing text', '2024-01-01T10:00:00Z and more'],
      ['beyond year 9999 once in UTC', '9999-12-31T23:59:59-05:00'],
      ['year 0', '0000-06-01T00:00:00Z'],
    ])('%s (%j) → 422 naming created_at', async (_what, value) => {
      expectValidationError(await postShorten(app, mapping({ created_at: value })), 'created_at');
    });
  });

  describe('body shape', () => {
    test('an unknown extra field → 422 naming it', async () => {
      expectValidationError(await postShorten(app, { ...mapping(), extra: 1 }), 'extra');
    });

    test('an id in the body → 422 (the database assigns it)', async () => {
      expectValidationError(await postShorten(app, { ...mapping(), id: 99 }), 'id');
    });

    test.each([
      ['an array', []],
      [
        'an array holding a mapping',
        [{ code: 'arrayed1', url: 'https://example.com', created_at: '2024-01-01T00:00:00Z', click_count: 0 }],
      ],
      ['a string', 'abcdef1'],
      ['a number', 42],
      ['null', null],
      ['true', true],
    ])('%s → 422 naming the body', async (_what, value) => {
      expectValidationError(await postShorten(app, value), 'body');
    });

    test.each([
      ['truncated JSON', '{"code": "abcdef1",'],
      ['single quotes', "{'code': 'abcdef1'}"],
      ['a trailing comma', '{"code": "abcdef1",}'],
      ['bare words', 'hello'],
      ['whitespace only', '   '],
    ])('malformed JSON (%s) → 422', async (_what, payload) => {
      const response = await app.inject({
        method: 'POST',
        url: '/shorten',
        headers: { 'content-type': 'application/json' },
        payload,
      });
      expectValidationError(response, 'body');
    });

    test('an empty body with a JSON content type → 422', async () => {
      const response = await app.inject({
        method: 'POST',
        url: '/shorten',
        headers: { 'content-type': 'application/json' },
        payload: '',
      });
      expectValidationError(response, 'body');
    });

    test('no body and no content type → 422', async () => {
      expectValidationError(await app.inject({ method: 'POST', url: '/shorten' }), 'body');
    });
  });

  describe('media type and size', () => {
    test('text/plain → 415', async () => {
      const response = await app.inject({
        method: 'POST',
        url: '/shorten',
        headers: { 'content-type': 'text/plain' },
        payload: JSON.stringify(mapping()),
      });
      expectError(response, 415);
    });

    test('a body without a content type → 415', async () => {
      const response = await app.inject({ method: 'POST', url: '/shorten', payload: JSON.stringify(mapping()) });
      expectError(response, 415);
    });

    test('application/xml → 415', async () => {
      const response = await app.inject({
        method: 'POST',
        url: '/shorten',
        headers: { 'content-type': 'application/xml' },
        payload: '<mapping code="abcdef1"/>',
      });
      expectError(response, 415);
    });

    test('nothing is created by a refused body', async () => {
      const body = mapping();
      await app.inject({
        method: 'POST',
        url: '/shorten',
        headers: { 'content-type': 'text/plain' },
        payload: JSON.stringify(body),
      });
      expect(await findListed(app, body.code)).toBeUndefined();
    });

    test('a body over the limit (BODY_LIMIT) → 413; under it → 201', async () => {
      const small = mapping({ url: 'https://example.com/s' });
      expect(JSON.stringify(small).length).toBeLessThan(300);
      expect((await createMapping(configuredApp, small)).code).toBe(small.code);

      const big = { ...mapping(), url: `https://example.com/${'x'.repeat(400)}` };
      expect(JSON.stringify(big).length).toBeGreaterThan(300);
      expectError(await postShorten(configuredApp, big), 413);
      expect(await findListed(configuredApp, big.code)).toBeUndefined();
    });
  });
});
