import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { BACKENDS } from '../helpers/backends.js';
import {
  type CreateBody,
  type ReadBody,
  codeMaker,
  createMapping,
  expectError,
  expectJsonContentType,
  expectRedirect,
  expectValidationError,
  findListed,
  newMapping,
  patchMapping,
  HTTP_TEST_ENV,
} from '../helpers/http.js';
import { storedClicks as storedClicksOf } from '../helpers/stored-clicks.js';

/** Spec §4.1 (delete, rules 2, 3, 5), §2.1 UrlMappingUpdate, §8; design §2: PATCH, invalidation. */
describe.each(BACKENDS)('DELETE and PATCH /{code} on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  const code = codeMaker('upd');
  const mapping = (overrides: Partial<CreateBody> = {}) => newMapping(code, overrides);
  const app = useTestApp(backend, HTTP_TEST_ENV);

  const get = (path: string) => app.inject({ method: 'GET', url: path });
  const del = (path: string) => app.inject({ method: 'DELETE', url: path });
  const flush = () => app.service.clicks.flush();
  const storedClicks = (id: number) => storedClicksOf(app.service.database.db, { id });

  describe('DELETE', () => {
    test('204 with an empty body; the mapping is gone', async () => {
      const created = await createMapping(app, mapping());
      const response = await del(`/${created.code}`);
      expect(response.statusCode, response.body).toBe(204);
      expect(response.body).toBe('');
      expect(response.rawPayload.length).toBe(0);
      expect(await findListed(app, created.code)).toBeUndefined();
      expectError(await get(`/${created.code}`), 404);
    });

    test('an unknown code → 404 {detail}; deleting twice → 404 the second time', async () => {
      expectError(await del('/unknown01'), 404);
      const created = await createMapping(app, mapping());
      expect((await del(`/${created.code}`)).statusCode).toBe(204);
      expectError(await del(`/${created.code}`), 404);
    });

    test.each([
      ['5 characters', 'abcd5'],
      ['11 characters', 'abcdefghij1'],
      ['a hyphen', 'abc-12'],
      ['an encoded space', 'abc%2012'],
    ])('%s (/%s) → 422 naming code', async (_what, path) => {
      expectValidationError(await del(`/${path}`), 'code');
    });

    test('after a delete, GET answers 404 at once, even right after a cached redirect', async () => {
      const created = await createMapping(app, mapping({ url: 'https://example.com/doomed' }));
      expectRedirect(await get(`/${created.code}`), 'https://example.com/doomed');
      expectRedirect(await get(`/${created.code}`), 'https://example.com/doomed');
      expect((await del(`/${created.code}`)).statusCode).toBe(204);
      expectError(await get(`/${created.code}`), 404);
      expect((await app.inject({ method: 'HEAD', url: `/${created.code}` })).statusCode).toBe(404);
    });

    test('a code deleted and created again redirects to the new url, with only its own clicks', async () => {
      const value = code();
      await createMapping(app, mapping({ code: value, url: 'https://example.com/old' }));
      await get(`/${value}`);
      await get(`/${value}`);
      expect((await del(`/${value}`)).statusCode).toBe(204);
      const again = await createMapping(app, mapping({ code: value, url: 'https://example.com/new', click_count: 0 }));
      expectRedirect(await get(`/${value}`), 'https://example.com/new');
      await flush();
      expect((await findListed(app, value))?.click_count).toBe(1);
      expect(await storedClicks(again.id)).toBe(1);
    });

    test('deleting one mapping leaves the others', async () => {
      const keep = await createMapping(app, mapping({ url: 'https://example.com/keep' }));
      const drop = await createMapping(app, mapping());
      expect((await del(`/${drop.code}`)).statusCode).toBe(204);
      expect(await findListed(app, keep.code)).toEqual(keep);
      expectRedirect(await get(`/${keep.code}`), 'https://example.com/keep');
    });
  });

  describe('PATCH', () => {
    test('200 with the updated UrlMappingRead view', async () => {
      const created = await createMapping(app, mapping({ url: 'https://example.com/before', click_count: 2 }));
      const response = await patchMapping(app, created.code, { url: 'https://example.com/after' });
      expect(response.statusCode, response.body).toBe(200);
      expectJsonContentType(response);
      const updated = response.json<ReadBody>();
      expect(updated).toEqual({ ...created, url: 'https://example.com/after' });
      expect(Object.keys(updated).sort()).toEqual(['click_count', 'code', 'created_at', 'id', 'url']);
      expect(await findListed(app, created.code)).toEqual(updated);
    });

    test('{} is allowed and changes nothing', async () => {
      const created = await createMapping(app, mapping());
      const response = await patchMapping(app, created.code, {});
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toEqual(created);
      expect(await findListed(app, created.code)).toEqual(created);
    });

    test('null fields are left unchanged', async () => {
      const created = await createMapping(app, mapping({ click_count: 9 }));
      const response = await patchMapping(app, created.code, {
        code: null,
        url: null,
        created_at: null,
        click_count: null,
      });
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toEqual(created);
      expect(await findListed(app, created.code)).toEqual(created);
    });

    test('omitted fields are left unchanged, each field changes alone', async () => {
      const created = await createMapping(app, mapping({ click_count: 1 }));
      let expected: ReadBody = created;

      const withUrl = await patchMapping(app, created.code, { url: 'https://example.com/one' });
      expected = { ...expected, url: 'https://example.com/one' };
      expect(withUrl.json()).toEqual(expected);

      const withDate = await patchMapping(app, created.code, { created_at: '2030-06-15T12:00:00.25+02:00' });
      expected = { ...expected, created_at: '2030-06-15T10:00:00.25Z' };
      expect(withDate.json()).toEqual(expected);

      const withCount = await patchMapping(app, created.code, { click_count: 0 });
      expected = { ...expected, click_count: 0 };
      expect(withCount.json()).toEqual(expected);

      const newCode = code();
      const withCode = await patchMapping(app, created.code, { code: newCode });
      expected = { ...expected, code: newCode };
      expect(withCode.json()).toEqual(expected);

      expect(await findListed(app, newCode)).toEqual(expected);
    });

    test('every field at once', async () => {
      const created = await createMapping(app, mapping());
      const changes = {
        code: code(),
        url: 'https://example.com/all',
        created_at: '2020-01-01T00:00:00',
        click_count: 77,
      };
      const response = await patchMapping(app, created.code, changes);
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toEqual({ id: created.id, ...changes, created_at: '2020-01-01T00:00:00Z' });
    });

    test('a naive created_at is read as UTC; the result is RFC 3339 UTC', async () => {
      const created = await createMapping(app, mapping());
      const response = await patchMapping(app, created.code, { created_at: '2024-03-10T08:09:10.123456' });
      expect(response.json<ReadBody>().created_at).toBe('2024-03-10T08:09:10.123456Z');
    });

    describe('each field keeps its create rules (422, nothing changed)', () => {
      let target: ReadBody;
      beforeAll(async () => {
        if (!backend.available) return;
        target = await createMapping(app, mapping({ url: 'https://example.com/guarded', click_count: 3 }));
      });

      test.each([
        ['code', 'abcd5'],
        ['code', 'abcdefghij1'],
        ['code', 'abc-12'],
        ['code', 'abcdé1'],
        ['code', ''],
        ['code', 123456],
        ['code', true],
        ['url', ''],
        ['url', 'javascript:alert(1)'],
        ['url', 'ftp://example.com/f'],
        ['url', 'mailto:a@example.com'],
        ['url', 'http:example.com'],
        ['url', '/relative'],
        ['url', 'https://example.com/a b'],
        ['url', 'https://example.com/a\nb'],
        ['url', `https://example.com/${'a'.repeat(2029)}`],
        ['url', 5],
        ['created_at', 'not a date'],
        ['created_at', '2023-02-29T00:00:00Z'],
        ['created_at', '2024-13-01T00:00:00Z'],
        ['created_at', 1704067200],
        ['click_count', -1],
        ['click_count', 1.5],
        ['click_count', '5'],
        ['click_count', true],
        ['click_count', 2 ** 53],
      ] as const)('%s = %j → 422 naming the field', async (field, value) => {
        expectValidationError(await patchMapping(app, target.code, { [field]: value }), field);
        expect(await findListed(app, target.code)).toEqual(target);
      });

      test('an unknown field → 422 naming it', async () => {
        expectValidationError(await patchMapping(app, target.code, { id: 5 }), 'id');
        expectValidationError(
          await patchMapping(app, target.code, { url: 'https://example.com/x', extra: true }),
          'extra',
        );
        expect(await findListed(app, target.code)).toEqual(target);
      });

      test.each([
        ['an array', []],
        ['a string', 'https://example.com'],
        ['a number', 1],
        ['null', null],
      ])('a body that is %s → 422', async (_what, body) => {
        expectValidationError(await patchMapping(app, target.code, body), 'body');
      });

      test('malformed JSON → 422; text/plain → 415', async () => {
        const malformed = await app.inject({
          method: 'PATCH',
          url: `/${target.code}`,
          headers: { 'content-type': 'application/json' },
          payload: '{"url": ',
        });
        expectValidationError(malformed, 'body');
        const text = await app.inject({
          method: 'PATCH',
          url: `/${target.code}`,
          headers: { 'content-type': 'text/plain' },
          payload: '{"url": "https://example.com/t"}',
        });
        expectError(text, 415);
        expect(await findListed(app, target.code)).toEqual(target);
      });

      test('an invalid path code → 422 naming code', async () => {
        expectValidationError(await patchMapping(app, 'abc-12', { url: 'https://example.com/x' }), 'code');
        expectValidationError(await patchMapping(app, 'abcd5', {}), 'code');
      });
    });

    test('a new code that is taken → 409 "Code already exists"; both mappings unchanged', async () => {
      const a = await createMapping(app, mapping({ url: 'https://example.com/a' }));
      const b = await createMapping(app, mapping({ url: 'https://example.com/b' }));
      expectError(await patchMapping(app, b.code, { code: a.code }), 409, 'Code already exists');
      expect(await findListed(app, a.code)).toEqual(a);
      expect(await findListed(app, b.code)).toEqual(b);
      expectRedirect(await get(`/${a.code}`), 'https://example.com/a');
      expectRedirect(await get(`/${b.code}`), 'https://example.com/b');
    });

    test('a new code that differs only in case is not taken', async () => {
      const created = await createMapping(app, mapping({ code: 'lowcase01' }));
      await createMapping(app, mapping({ code: 'Lowcase01' }));
      const response = await patchMapping(app, created.code, { code: 'LOWCASE01' });
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json<ReadBody>().code).toBe('LOWCASE01');
    });

    test('setting the code to itself is allowed', async () => {
      const created = await createMapping(app, mapping());
      const response = await patchMapping(app, created.code, { code: created.code });
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toEqual(created);
    });

    test.each(['shorten', 'Metrics', 'HEALTH'])('a reserved new code (%s) → 422 "Code is reserved"', async (value) => {
      const created = await createMapping(app, mapping());
      expectError(await patchMapping(app, created.code, { code: value }), 422, 'Code is reserved');
      expect(await findListed(app, created.code)).toEqual(created);
    });

    test('an unknown code → 404 {detail}', async () => {
      expectError(await patchMapping(app, 'unknown02', { url: 'https://example.com/x' }), 404);
      expectError(await patchMapping(app, 'unknown02', {}), 404);
      expectError(await patchMapping(app, 'unknown02', { click_count: 3 }), 404);
      expectError(await patchMapping(app, 'unknown02', { code: code() }), 404);
    });

    test('a changed code moves the mapping: the old code answers 404 at once, even after being cached', async () => {
      const created = await createMapping(app, mapping({ url: 'https://example.com/moving' }));
      expectRedirect(await get(`/${created.code}`), 'https://example.com/moving');
      expectRedirect(await get(`/${created.code}`), 'https://example.com/moving');
      const newCode = code();
      const response = await patchMapping(app, created.code, { code: newCode });
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json<ReadBody>()).toMatchObject({ id: created.id, code: newCode });
      expectError(await get(`/${created.code}`), 404);
      expect((await app.inject({ method: 'HEAD', url: `/${created.code}` })).statusCode).toBe(404);
      expectRedirect(await get(`/${newCode}`), 'https://example.com/moving');
      expectError(await patchMapping(app, created.code, {}), 404);
      expectError(await del(`/${created.code}`), 404);
    });

    test('moving onto a code that was looked up as unknown resolves it at once', async () => {
      const created = await createMapping(app, mapping({ url: 'https://example.com/onto' }));
      const newCode = code();
      expectError(await get(`/${newCode}`), 404);
      expectError(await get(`/${newCode}`), 404);
      expect((await patchMapping(app, created.code, { code: newCode })).statusCode).toBe(200);
      expectRedirect(await get(`/${newCode}`), 'https://example.com/onto');
    });

    test('the old code can be used again after a move', async () => {
      const created = await createMapping(app, mapping({ url: 'https://example.com/first' }));
      const newCode = code();
      expect((await patchMapping(app, created.code, { code: newCode })).statusCode).toBe(200);
      const reused = await createMapping(app, mapping({ code: created.code, url: 'https://example.com/second' }));
      expect(reused.id).not.toBe(created.id);
      expectRedirect(await get(`/${created.code}`), 'https://example.com/second');
      expectRedirect(await get(`/${newCode}`), 'https://example.com/first');
    });

    test('a changed url redirects to the new url at once, even after being cached', async () => {
      const created = await createMapping(app, mapping({ url: 'https://example.com/v1' }));
      expectRedirect(await get(`/${created.code}`), 'https://example.com/v1');
      expectRedirect(await get(`/${created.code}`), 'https://example.com/v1');
      expect((await patchMapping(app, created.code, { url: 'https://example.com/v2' })).statusCode).toBe(200);
      expectRedirect(await get(`/${created.code}`), 'https://example.com/v2');
      expect((await patchMapping(app, created.code, { url: 'https://例え.jp/新' })).statusCode).toBe(200);
      expectRedirect(await get(`/${created.code}`), new URL('https://例え.jp/新').href);
    });

    test('click_count set explicitly replaces the count; buffered clicks are not added on top', async () => {
      const created = await createMapping(app, mapping({ click_count: 0 }));
      for (let i = 0; i < 3; i++) await get(`/${created.code}`);
      expect((await findListed(app, created.code))?.click_count).toBe(3);

      const response = await patchMapping(app, created.code, { click_count: 10 });
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json<ReadBody>().click_count).toBe(10);
      expect((await findListed(app, created.code))?.click_count).toBe(10);
      await flush();
      expect((await findListed(app, created.code))?.click_count).toBe(10);
      expect(await storedClicks(created.id)).toBe(10);

      await get(`/${created.code}`);
      expect((await findListed(app, created.code))?.click_count).toBe(11);
      await flush();
      expect(await storedClicks(created.id)).toBe(11);
    });

    test('click_count set while a flush is under way is exactly the value set', async () => {
      const created = await createMapping(app, mapping({ click_count: 0 }));
      for (let i = 0; i < 4; i++) await get(`/${created.code}`);
      const flushing = flush();
      const response = await patchMapping(app, created.code, { click_count: 100 });
      await flushing;
      expect(response.json<ReadBody>().click_count).toBe(100);
      await flush();
      expect((await findListed(app, created.code))?.click_count).toBe(100);
      expect(await storedClicks(created.id)).toBe(100);
    });

    test('click_count 0 resets the count', async () => {
      const created = await createMapping(app, mapping({ click_count: 50 }));
      await get(`/${created.code}`);
      expect((await patchMapping(app, created.code, { click_count: 0 })).json<ReadBody>().click_count).toBe(0);
      await flush();
      expect((await findListed(app, created.code))?.click_count).toBe(0);
    });

    test('a PATCH that does not set click_count keeps the buffered clicks', async () => {
      const created = await createMapping(app, mapping({ click_count: 1 }));
      await get(`/${created.code}`);
      await get(`/${created.code}`);
      const newCode = code();
      const response = await patchMapping(app, created.code, { code: newCode, url: 'https://example.com/kept' });
      expect(response.json<ReadBody>().click_count).toBe(3);
      await flush();
      expect((await findListed(app, newCode))?.click_count).toBe(3);
      expect(await storedClicks(created.id)).toBe(3);
    });
  });
});
