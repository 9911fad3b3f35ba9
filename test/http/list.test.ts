import type { LightMyRequestResponse } from 'fastify';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { BACKENDS } from '../helpers/backends.js';
import {
  type ReadBody,
  codeMaker,
  createMapping,
  expectJsonContentType,
  expectValidationError,
  newMapping,
  nextLink,
  HTTP_TEST_ENV,
} from '../helpers/http.js';

const TOTAL = 11;

/** Spec §4.1 (list_all); design §2: every mapping in id order, `limit`/`after` paging, `Link`. */
describe.each(BACKENDS)('GET /urls on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  const code = codeMaker('lst');
  const app = useTestApp(backend, HTTP_TEST_ENV);
  let created: ReadBody[] = [];

  const list = (query = '') => app.inject({ method: 'GET', url: `/urls${query}` });
  const ids = (response: LightMyRequestResponse) => response.json<ReadBody[]>().map((m) => m.id);

  // Runs first: the database is still empty.
  test('an empty database → 200 []', async () => {
    const response = await list();
    expect(response.statusCode).toBe(200);
    expectJsonContentType(response);
    expect(response.json()).toEqual([]);
    expect(response.headers.link).toBeUndefined();
    const paged = await list('?limit=5');
    expect(paged.json()).toEqual([]);
    expect(paged.headers.link).toBeUndefined();
  });

  describe('with mappings', () => {
    beforeAll(async () => {
      if (!backend.available) return;
      created = [];
      for (let i = 0; i < TOTAL; i++) {
        created.push(
          await createMapping(
            app,
            newMapping(code, {
              url: `https://example.com/${i}`,
              created_at: `2024-01-${String(TOTAL + 1 - i).padStart(2, '0')}T00:00:00Z`,
              click_count: i,
            }),
          ),
        );
      }
    });

    test('with no query: every mapping, as UrlMappingRead, in id order, no Link', async () => {
      const response = await list();
      expect(response.statusCode).toBe(200);
      expectJsonContentType(response);
      expect(response.headers.link).toBeUndefined();
      const body = response.json<ReadBody[]>();
      expect(Array.isArray(body)).toBe(true);
      expect(body).toEqual(created);
      const sorted = [...ids(response)].sort((a, b) => a - b);
      expect(ids(response)).toEqual(sorted);
      expect(new Set(ids(response)).size).toBe(TOTAL);
    });

    test('the order is by id, not by created_at or code', async () => {
      // created_at runs backwards in the fixtures; the ids run forwards.
      const body = (await list()).json<ReadBody[]>();
      expect(body.map((m) => m.created_at)).toEqual([...body.map((m) => m.created_at)].sort().reverse());
      expect(ids(await list())).toEqual(created.map((m) => m.id));
    });

    test.each([1, 3, 4, 5, TOTAL - 1])(
      'limit=%i: following Link walks every page, no duplicates, no gaps',
      async (limit) => {
        const seen: ReadBody[] = [];
        let url: string | undefined = `/urls?limit=${limit}`;
        let pages = 0;
        while (url !== undefined) {
          const response = await app.inject({ method: 'GET', url });
          expect(response.statusCode, response.body).toBe(200);
          const page = response.json<ReadBody[]>();
          pages++;
          expect(pages).toBeLessThanOrEqual(TOTAL + 1);
          expect(page.length).toBeLessThanOrEqual(limit);
          seen.push(...page);
          url = nextLink(response);
          if (url !== undefined) {
            // Present exactly when more rows exist, pointing after this page's last id.
            expect(page.length).toBe(limit);
            expect(response.headers.link).toBe(`</urls?limit=${limit}&after=${page[page.length - 1]!.id}>; rel="next"`);
          }
        }
        expect(seen).toEqual(created);
        expect(pages).toBe(Math.ceil(TOTAL / limit));
      },
    );

    test('limit equal to the number of rows: one page, no Link', async () => {
      const response = await list(`?limit=${TOTAL}`);
      expect(response.json()).toEqual(created);
      expect(response.headers.link).toBeUndefined();
    });

    test('limit 1000 (the maximum): every row, no Link', async () => {
      const response = await list('?limit=1000');
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual(created);
      expect(response.headers.link).toBeUndefined();
    });

    test('limit 1 (the minimum): the first row and a Link to the next', async () => {
      const response = await list('?limit=1');
      expect(response.json()).toEqual([created[0]]);
      expect(response.headers.link).toBe(`</urls?limit=1&after=${created[0]!.id}>; rel="next"`);
    });

    test('after without limit: every row with a greater id, no Link', async () => {
      const response = await list(`?after=${created[3]!.id}`);
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual(created.slice(4));
      expect(response.headers.link).toBeUndefined();
    });

    test('after 0: every row', async () => {
      expect((await list('?after=0')).json()).toEqual(created);
    });

    test('after the last id, or beyond: [] and no Link', async () => {
      const last = created[TOTAL - 1]!.id;
      for (const query of [`?after=${last}`, `?after=${last}&limit=2`, `?after=${last + 1000}`]) {
        const response = await list(query);
        expect(response.statusCode).toBe(200);
        expect(response.json()).toEqual([]);
        expect(response.headers.link).toBeUndefined();
      }
    });

    test('after a deleted id still pages from the next existing one', async () => {
      const victim = await createMapping(app, newMapping(code));
      const next = await createMapping(app, newMapping(code));
      expect((await app.inject({ method: 'DELETE', url: `/${victim.code}` })).statusCode).toBe(204);
      const response = await list(`?after=${victim.id}&limit=1`);
      expect(response.json()).toEqual([next]);
      expect(response.headers.link).toBeUndefined();
      expect((await app.inject({ method: 'DELETE', url: `/${next.code}` })).statusCode).toBe(204);
      expect((await list()).json()).toEqual(created);
    });

    test('click counts include clicks not yet flushed', async () => {
      const target = created[2]!;
      expect((await app.inject({ method: 'GET', url: `/${target.code}` })).statusCode).toBe(302);
      const body = (await list()).json<ReadBody[]>();
      expect(body.find((m) => m.id === target.id)?.click_count).toBe(target.click_count + 1);
      const paged = (await list(`?limit=1&after=${created[1]!.id}`)).json<ReadBody[]>();
      expect(paged).toEqual([{ ...target, click_count: target.click_count + 1 }]);
      await app.service.clicks.flush();
      expect((await list(`?limit=1&after=${created[1]!.id}`)).json()).toEqual(paged);
      created[2] = { ...target, click_count: target.click_count + 1 };
    });
  });

  describe('query validation', () => {
    test.each(['0', '1001', '-1', 'abc', '1.5', '', '1e400'])('limit=%j → 422 naming limit', async (value) => {
      expectValidationError(await list(`?limit=${value}`), 'limit');
    });

    test.each(['-1', 'abc', '1.5', '', String(2 ** 53), '99999999999999999999'])(
      'after=%j → 422 naming after',
      async (value) => {
        expectValidationError(await list(`?after=${value}`), 'after');
      },
    );

    test('a bad limit with a good after, and the other way round → 422', async () => {
      expectValidationError(await list('?limit=0&after=1'), 'limit');
      expectValidationError(await list('?limit=2&after=-5'), 'after');
    });
  });
});
