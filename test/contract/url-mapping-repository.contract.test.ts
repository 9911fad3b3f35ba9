import { beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/adapters/storage/database.js';
import { KyselyUrlMappingRepository } from '../../src/adapters/storage/kysely-url-mapping-repository.js';
import { migrateToLatest } from '../../src/adapters/storage/migrations.js';
import { AppError } from '../../src/domain/errors.js';
import type { UrlMapping } from '../../src/domain/url-mapping.js';
import type { ExpiredEventFor, UrlMappingRepository } from '../../src/ports/url-mapping-repository.js';
import { BACKENDS, testConfig } from '../helpers/backends.js';
import { useOpenDatabase } from '../helpers/storage.js';

/** One contract, every storage adapter. */
describe.each(BACKENDS)('UrlMappingRepository on $name', (backend) => {
  const { database, testDatabase: testDb } = useOpenDatabase(backend);
  let repo: UrlMappingRepository;
  let n = 0;
  const code = () => `c${String(++n).padStart(6, '0')}`;
  const mapping = (
    overrides: Partial<{ code: string; url: string; created_at: string; click_count: number }> = {},
  ) => ({
    code: code(),
    url: 'https://example.com/a',
    created_at: '2024-05-06T07:08:09.123456Z',
    click_count: 0,
    ...overrides,
  });

  beforeAll(() => {
    if (backend.available)
      repo = new KyselyUrlMappingRepository(database.db, database.dialect, undefined, database.reader);
  });

  it.skipIf(!backend.available)('creates and reads back a mapping, timestamp to the microsecond', async () => {
    const input = mapping({ click_count: 7 });
    const created = await repo.create(input);
    expect(created).toEqual({ id: expect.any(Number), ...input, owner: null });
    expect(await repo.findByCode(input.code)).toEqual(created);
    // The redirect path's read: the target, and the lifecycle limits (none here) it checks.
    expect(await repo.findTarget(input.code)).toEqual({
      id: created.id,
      url: input.url,
      expires_at: null,
      max_visits: null,
      visits_used: 0,
    });
  });

  it.skipIf(!backend.available)('assigns increasing ids', async () => {
    const a = await repo.create(mapping());
    const b = await repo.create(mapping());
    expect(b.id).toBeGreaterThan(a.id);
  });

  it.skipIf(!backend.available)('refuses a duplicate code with codeConflict, case-sensitively', async () => {
    const first = await repo.create(mapping({ code: 'DupCode1' }));
    await expect(repo.create(mapping({ code: 'DupCode1' }))).rejects.toMatchObject({
      statusCode: 409,
      detail: 'Code already exists',
    });
    await expect(repo.create(mapping({ code: 'DupCode1' }))).rejects.toBeInstanceOf(AppError);
    const other = await repo.create(mapping({ code: 'dupcode1' }));
    expect(other.id).not.toBe(first.id);
  });

  it.skipIf(!backend.available)(
    'answers creates made at once each for itself: its row, or codeConflict for a code taken in the same moment',
    async () => {
      const distinct = Array.from({ length: 12 }, () => mapping());
      const same = Array.from({ length: 5 }, (_, i) => mapping({ code: 'SameTime1', url: `https://example.com/${i}` }));
      const settled = await Promise.allSettled([...distinct, ...same].map((m) => repo.create(m)));
      const created = settled.slice(0, distinct.length).map((s) => (s.status === 'fulfilled' ? s.value : s.reason));
      expect(created).toEqual(distinct.map((m) => ({ id: expect.any(Number), ...m, owner: null })));
      expect(new Set(created.map((m: UrlMapping) => m.id)).size).toBe(distinct.length);
      const ofSame = settled.slice(distinct.length);
      const won = ofSame.flatMap((s, i) => (s.status === 'fulfilled' ? [{ row: s.value, input: same[i]! }] : []));
      expect(won).toHaveLength(1);
      expect(won[0]!.row).toEqual({ id: expect.any(Number), ...won[0]!.input, owner: null });
      for (const s of ofSame.filter((o) => o.status === 'rejected')) {
        expect((s as PromiseRejectedResult).reason).toMatchObject({ statusCode: 409, detail: 'Code already exists' });
      }
      expect(await repo.findByCode('SameTime1')).toEqual(won[0]!.row);
    },
  );

  it.skipIf(!backend.available)('finds nothing for an unknown code', async () => {
    expect(await repo.findByCode('nothere1')).toBeUndefined();
    expect(await repo.findTarget('nothere1')).toBeUndefined();
  });

  it.skipIf(!backend.available)('lists in id order, after an id, up to a limit', async () => {
    const made = [await repo.create(mapping()), await repo.create(mapping()), await repo.create(mapping())];
    const all = await repo.list();
    const ids = all.map((m) => m.id);
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    expect(ids).toEqual(expect.arrayContaining(made.map((m) => m.id)));
    const page = await repo.list({ after: made[0]!.id, limit: 2 });
    expect(page.map((m) => m.id)).toEqual([made[1]!.id, made[2]!.id]);
    expect(await repo.list({ after: made[2]!.id + 1_000_000 })).toEqual([]);
  });

  it.skipIf(!backend.available)('updates only the given fields and can move the code', async () => {
    const original = await repo.create(mapping());
    const newCode = code();
    const updated = await repo.update(original.code, { code: newCode, url: null, click_count: 42 });
    expect(updated).toEqual({ ...original, code: newCode, click_count: 42 });
    expect(await repo.findByCode(original.code)).toBeUndefined();
    expect(await repo.update(newCode, {})).toEqual(updated);
    expect(await repo.update('nothere2', { url: 'https://x.example' })).toBeUndefined();
  });

  it.skipIf(!backend.available)('refuses an update onto a taken code', async () => {
    const a = await repo.create(mapping());
    const b = await repo.create(mapping());
    await expect(repo.update(b.code, { code: a.code })).rejects.toMatchObject({ statusCode: 409 });
    expect(await repo.findByCode(b.code)).toEqual(b);
  });

  it.skipIf(!backend.available)('deletes and returns the id once', async () => {
    const m = await repo.create(mapping());
    expect(await repo.delete(m.code)).toBe(m.id);
    expect(await repo.delete(m.code)).toBeUndefined();
    expect(await repo.findByCode(m.code)).toBeUndefined();
  });

  it.skipIf(!backend.available)('adds click deltas in one batch, ignoring unknown ids', async () => {
    const a = await repo.create(mapping({ click_count: 1 }));
    const b = await repo.create(mapping());
    await repo.addClicks([
      [a.id, 5],
      [b.id, 2],
      [999_999_999, 3],
    ]);
    expect((await repo.findByCode(a.code))?.click_count).toBe(6);
    expect((await repo.findByCode(b.code))?.click_count).toBe(2);
  });

  it.skipIf(!backend.available)('adds clicks for more mappings than one statement batch', async () => {
    const made = [];
    for (let i = 0; i < 620; i++) made.push(await repo.create(mapping()));
    await repo.addClicks(made.map((m) => [m.id, 1] as const));
    const rows = await repo.list({ after: made[0]!.id - 1, limit: 620 });
    expect(rows.every((r) => r.click_count === 1)).toBe(true);
  });

  it.skipIf(!backend.available)('keeps a very large click count exactly', async () => {
    const m = await repo.create(mapping({ click_count: 2 ** 40 }));
    await repo.addClicks([[m.id, 1]]);
    expect((await repo.findByCode(m.code))?.click_count).toBe(2 ** 40 + 1);
  });

  describe('click deltas and their compaction', () => {
    const test = it.skipIf(!backend.available);
    /** Folds every pending delta, chunk by chunk, as the click buffer does. */
    const compactAll = async (target: UrlMappingRepository = repo, limit = 500) => {
      let folded = 0;
      let after: number | undefined;
      do {
        const chunk = await target.compactClicks({ after, limit });
        folded += chunk.folded;
        after = chunk.next;
      } while (after !== undefined);
      return folded;
    };
    /** The count folded into the row, without pending deltas, straight from the table. */
    const foldedCount = async (id: number) =>
      (
        await database.db
          .selectFrom('url_mappings')
          .select('click_count')
          .where('id', '=', id)
          .executeTakeFirstOrThrow()
      ).click_count;
    /**
     * A repository over connections of its own, as another instance would have. SQLite: the same
     * one, since a process has one connection (a second, in the same thread, would wait for the
     * first while holding the thread the first needs to finish).
     */
    const withSecondRepository = async (use: (other: UrlMappingRepository) => Promise<void>) => {
      if (database.dialect === 'sqlite') return use(repo);
      const other = openDatabase(testConfig(testDb.databaseUrl).database);
      try {
        await use(new KyselyUrlMappingRepository(other.db, other.dialect));
      } finally {
        await other.close();
      }
    };
    const pendingRows = async (id: number) =>
      (await database.db.selectFrom('url_click_deltas').select('delta').where('url_id', '=', id).execute()).length;

    test('deltas count in every read at once, and the same after compaction', async () => {
      const m = await repo.create(mapping({ click_count: 3 }));
      await repo.addClicks([[m.id, 2]]);
      await repo.addClicks([[m.id, 5]]);
      expect((await repo.findByCode(m.code))?.click_count).toBe(10);
      expect((await repo.list({ after: m.id - 1, limit: 1 }))[0]).toEqual({ ...m, click_count: 10 });
      expect(await foldedCount(m.id)).toBe(3);
      expect(await pendingRows(m.id)).toBe(1);

      expect(await compactAll()).toBeGreaterThanOrEqual(1);
      expect(await foldedCount(m.id)).toBe(10);
      expect(await pendingRows(m.id)).toBe(0);
      expect((await repo.findByCode(m.code))?.click_count).toBe(10);
      expect((await repo.list({ after: m.id - 1, limit: 1 }))[0]).toEqual({ ...m, click_count: 10 });

      await repo.addClicks([[m.id, 1]]);
      expect((await repo.findByCode(m.code))?.click_count).toBe(11);
    });

    test('a chunk is added once: written again, or after a later one of its writer, it adds nothing', async () => {
      const m = await repo.create(mapping());
      const writer = `writer-${m.id}`;
      const at = Date.now();
      expect(await repo.addClicks([[m.id, 2]], undefined, { writer, seq: 1, at })).toBe(true);
      expect(await repo.addClicks([[m.id, 2]], undefined, { writer, seq: 1, at })).toBe(false);
      expect(await repo.addClicks([[m.id, 3]], undefined, { writer, seq: 2, at })).toBe(true);
      expect(await repo.addClicks([[m.id, 2]], undefined, { writer, seq: 1, at })).toBe(false);
      // Another writer has an order of its own; without a chunk a write is always added.
      expect(await repo.addClicks([[m.id, 4]], undefined, { writer: `${writer}-b`, seq: 1, at })).toBe(true);
      expect(await repo.addClicks([[m.id, 1]])).toBe(true);
      expect((await repo.findByCode(m.code))?.click_count).toBe(10);
      await compactAll();
      expect((await repo.findByCode(m.code))?.click_count).toBe(10);
    });

    test('forgets the writers whose last chunk is older than asked, only those', async () => {
      const m = await repo.create(mapping());
      const writer = `forget-${m.id}`;
      await repo.addClicks([[m.id, 1]], undefined, { writer: `${writer}-old`, seq: 5, at: 1_000 });
      await repo.addClicks([[m.id, 1]], undefined, { writer: `${writer}-new`, seq: 5, at: 3_000 });
      expect(await repo.forgetClickWriters(2_000)).toBeGreaterThanOrEqual(1);
      const left = await database.db
        .selectFrom('click_writers')
        .select(['writer', 'last_seq'])
        .where('writer', 'like', `${writer}-%`)
        .execute();
      expect(left).toEqual([{ writer: `${writer}-new`, last_seq: 5 }]);
    });

    test('adds the deltas of one id given twice in one batch', async () => {
      const m = await repo.create(mapping());
      await repo.addClicks([
        [m.id, 1],
        [m.id, 4],
      ]);
      expect((await repo.findByCode(m.code))?.click_count).toBe(5);
    });

    test('compaction folds each delta once: run again, or several at once, it adds nothing', async () => {
      const made: UrlMapping[] = [];
      for (let i = 0; i < 12; i++) made.push(await repo.create(mapping({ click_count: i })));
      await repo.addClicks(made.map((m, i) => [m.id, i + 1] as const));
      const expected = made.map((m, i) => ({ ...m, click_count: 2 * i + 1 }));
      const read = () => repo.list({ after: made[0]!.id - 1, limit: made.length });
      expect(await read()).toEqual(expected);

      // Compactions side by side, over one connection pool and over two, in small chunks.
      await withSecondRepository(async (other) => {
        const folded = await Promise.all([compactAll(repo, 3), compactAll(repo, 5), compactAll(other, 4)]);
        expect(folded.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(made.length);
      });
      expect(await read()).toEqual(expected);
      for (const [i, m] of made.entries()) expect(await foldedCount(m.id)).toBe(2 * i + 1);

      expect(await compactAll()).toBe(0);
      expect(await read()).toEqual(expected);
    });

    test('clicks added while compactions run are all counted, once', async () => {
      const made: UrlMapping[] = [];
      for (let i = 0; i < 30; i++) made.push(await repo.create(mapping()));
      await withSecondRepository(async (other) => {
        const work: Promise<unknown>[] = [];
        for (let round = 0; round < 10; round++) {
          work.push(repo.addClicks(made.map((m) => [m.id, 1] as const)));
          work.push(other.addClicks(made.map((m) => [m.id, 2] as const)));
          work.push(compactAll(round % 2 === 0 ? repo : other, 2));
        }
        await Promise.all(work);
      });
      for (const m of made) expect((await repo.findByCode(m.code))?.click_count).toBe(30);
      await compactAll();
      for (const m of made) {
        expect((await repo.findByCode(m.code))?.click_count).toBe(30);
        expect(await foldedCount(m.id)).toBe(30);
      }
    });

    test('a count set, or a mapping deleted, while compactions run is exactly that', async () => {
      const kept: UrlMapping[] = [];
      const dropped: UrlMapping[] = [];
      for (let i = 0; i < 10; i++) kept.push(await repo.create(mapping({ click_count: 1 })));
      for (let i = 0; i < 10; i++) dropped.push(await repo.create(mapping()));
      await repo.addClicks([...kept, ...dropped].map((m) => [m.id, 5] as const));
      await withSecondRepository(async (other) => {
        const work: Promise<unknown>[] = [compactAll(other, 1), compactAll(repo, 2)];
        for (const [i, m] of kept.entries()) {
          work.push(
            expect(repo.update(m.code, { click_count: 100 + i })).resolves.toEqual({ ...m, click_count: 100 + i }),
          );
        }
        for (const m of dropped) work.push(expect(other.delete(m.code)).resolves.toBe(m.id));
        await Promise.all(work);
      });
      await compactAll();
      for (const [i, m] of kept.entries()) {
        expect((await repo.findByCode(m.code))?.click_count).toBe(100 + i);
        expect(await foldedCount(m.id)).toBe(100 + i);
      }
      for (const m of dropped) expect(await repo.findByCode(m.code)).toBeUndefined();
    });

    test('setting click_count replaces the pending deltas, before and after compaction', async () => {
      const m = await repo.create(mapping({ click_count: 1 }));
      await repo.addClicks([[m.id, 7]]);
      expect(await repo.update(m.code, { click_count: 42 })).toEqual({ ...m, click_count: 42 });
      expect((await repo.findByCode(m.code))?.click_count).toBe(42);
      expect(await pendingRows(m.id)).toBe(0);
      await compactAll();
      expect((await repo.findByCode(m.code))?.click_count).toBe(42);

      await repo.addClicks([[m.id, 1]]);
      expect(await repo.update(m.code, { click_count: 0 })).toEqual({ ...m, click_count: 0 });
      await repo.addClicks([[m.id, 2]]);
      await compactAll();
      expect((await repo.findByCode(m.code))?.click_count).toBe(2);
    });

    test('an update that leaves click_count keeps the pending deltas and returns them counted', async () => {
      const m = await repo.create(mapping({ click_count: 1 }));
      await repo.addClicks([[m.id, 4]]);
      const newCode = code();
      expect(await repo.update(m.code, { code: newCode, url: 'https://example.com/b' })).toEqual({
        ...m,
        code: newCode,
        url: 'https://example.com/b',
        click_count: 5,
      });
      await compactAll();
      expect((await repo.findByCode(newCode))?.click_count).toBe(5);
    });

    test('a failed update leaves the pending deltas as they were', async () => {
      const a = await repo.create(mapping());
      const b = await repo.create(mapping({ click_count: 1 }));
      await repo.addClicks([[b.id, 2]]);
      await expect(repo.update(b.code, { code: a.code, click_count: 9 })).rejects.toMatchObject({ statusCode: 409 });
      expect((await repo.findByCode(b.code))?.click_count).toBe(3);
    });

    test('a deleted and re-created code starts from its own count, whatever was pending or arrives late', async () => {
      const old = await repo.create(mapping({ click_count: 2 }));
      await repo.addClicks([[old.id, 5]]);
      expect(await repo.delete(old.code)).toBe(old.id);
      expect(await pendingRows(old.id)).toBe(0);
      // A flush of another instance that buffered clicks before the delete lands after it.
      await repo.addClicks([[old.id, 3]]);
      const again = await repo.create(mapping({ code: old.code, click_count: 1 }));
      expect(again.id).not.toBe(old.id);
      expect((await repo.findByCode(old.code))?.click_count).toBe(1);
      await repo.addClicks([[again.id, 1]]);
      expect((await repo.findByCode(old.code))?.click_count).toBe(2);
      await compactAll();
      expect(await pendingRows(old.id)).toBe(0);
      expect((await repo.findByCode(old.code))?.click_count).toBe(2);
      expect((await repo.list()).some((m) => m.id === old.id)).toBe(false);
    });

    test('pages of the list count pending deltas, and read the same after compaction', async () => {
      const made: UrlMapping[] = [];
      for (let i = 0; i < 7; i++) made.push(await repo.create(mapping({ click_count: 10 * i })));
      await repo.addClicks(made.filter((_, i) => i % 2 === 0).map((m) => [m.id, 1] as const));
      await repo.addClicks([[made[3]!.id, 5]]);
      const expected = made.map((m, i) => ({ ...m, click_count: 10 * i + (i % 2 === 0 ? 1 : 0) + (i === 3 ? 5 : 0) }));
      const pages = async () => {
        const seen: UrlMapping[] = [];
        let after = made[0]!.id - 1;
        for (;;) {
          const page = await repo.list({ after, limit: 3 });
          const ours = page.filter((m) => m.id <= made[6]!.id);
          seen.push(...ours);
          if (ours.length < 3) return seen;
          after = page[page.length - 1]!.id;
        }
      };
      expect(await pages()).toEqual(expected);
      await compactAll(repo, 2);
      expect(await pages()).toEqual(expected);
    });

    test('a database from before the deltas table keeps its mappings and counts', async () => {
      const m = await repo.create(mapping({ click_count: 6 }));
      await compactAll();
      await database.db.schema.dropTable('url_click_deltas').execute();
      await database.db
        .deleteFrom('kysely_migration' as never)
        .where('name' as never, '=', '0040_url_click_deltas' as never)
        .execute();
      expect((await migrateToLatest(database.db, database.dialect)).applied).toEqual(['0040_url_click_deltas']);
      expect(await repo.findByCode(m.code)).toEqual(m);
      await repo.addClicks([[m.id, 1]]);
      expect((await repo.findByCode(m.code))?.click_count).toBe(7);
    });
  });

  describe('owners, search and sort', () => {
    const test = it.skipIf(!backend.available);
    let nextOwner = 9000;
    /** A user id no other test uses, so that `owner` filters to this test's mappings. */
    const owner = () => ++nextOwner;
    const ids = (rows: readonly UrlMapping[]) => rows.map((m) => m.id);
    /** Every page of `options`, `limit` at a time, keyset by the last id of each page. */
    async function allPages(options: Parameters<UrlMappingRepository['list']>[0], limit: number) {
      const seen: UrlMapping[] = [];
      let after: number | undefined;
      for (;;) {
        const page = await repo.list({ ...options, limit, ...(after === undefined ? {} : { after }) });
        seen.push(...page);
        if (page.length < limit) return seen;
        after = page[page.length - 1]!.id;
      }
    }

    test('creates made at once keep each one its owner (or none)', async () => {
      const user = owner();
      const inputs = Array.from({ length: 10 }, (_, i) => ({ ...mapping(), owner: i % 2 === 0 ? user : null }));
      const created = await Promise.all(inputs.map((m) => repo.create(m)));
      expect(created).toEqual(inputs.map((m) => ({ id: expect.any(Number), ...m })));
      for (const row of created) expect(await repo.findByCode(row.code)).toEqual(row);
    });

    test('records the owner and reads it back; anonymous mappings have none', async () => {
      const user = owner();
      const owned = await repo.create({ ...mapping(), owner: user });
      expect(owned.owner).toBe(user);
      expect(await repo.findByCode(owned.code)).toEqual(owned);
      expect((await repo.list({ owner: user })).map((m) => m.code)).toEqual([owned.code]);
      const anonymous = await repo.create(mapping());
      expect((await repo.findByCode(anonymous.code))?.owner).toBeNull();
      expect(ids(await repo.list({ owner: null }))).toContain(anonymous.id);
      expect(ids(await repo.list({ owner: null }))).not.toContain(owned.id);
    });

    test('an owner guard refuses a change or delete of a mapping with another owner', async () => {
      const user = owner();
      const m = await repo.create({ ...mapping(), owner: user });
      expect(
        await repo.update(m.code, { url: 'https://example.com/x' }, undefined, { owner: user + 1 }),
      ).toBeUndefined();
      expect(await repo.update(m.code, {}, undefined, { owner: null })).toBeUndefined();
      expect(await repo.delete(m.code, undefined, { owner: null })).toBeUndefined();
      expect((await repo.findByCode(m.code))?.url).toBe(m.url);
      const changed = await repo.update(m.code, { url: 'https://example.com/y' }, undefined, { owner: user });
      expect(changed).toEqual({ ...m, url: 'https://example.com/y' });
      expect(await repo.delete(m.code, undefined, { owner: user })).toBe(m.id);
      const anonymous = await repo.create(mapping());
      expect(await repo.delete(anonymous.code, undefined, { owner: null })).toBe(anonymous.id);
    });

    test.each([
      ['not yet indexed', false],
      ['indexed', true],
    ])(
      'q finds a substring of the code or the URL, ignoring case, LIKE wildcards taken literally (%s)',
      async (_what, indexed) => {
        const user = owner();
        const mark = `Zq${user}`;
        const byCode = await repo.create({ ...mapping({ code: `${mark}a` }), owner: user });
        const byUrl = await repo.create({
          ...mapping({ url: `https://example.com/${mark.toLowerCase()}/x` }),
          owner: user,
        });
        const literal = await repo.create({ ...mapping({ url: 'https://example.com/50%_off' }), owner: user });
        await repo.create({ ...mapping({ url: 'https://example.com/500xoff' }), owner: user });
        // SQLite indexes new rows in the background; searches read the rest directly.
        if (indexed) while ((await (repo as KyselyUrlMappingRepository).indexSearch(1000)) > 0);
        expect(ids(await repo.list({ q: mark.toUpperCase() }))).toEqual([byCode.id, byUrl.id]);
        expect(ids(await repo.list({ q: '50%_off', owner: user }))).toEqual([literal.id]);
        expect(ids(await repo.list({ q: 'Zq', owner: user }))).toEqual([byCode.id, byUrl.id]);
        expect(await repo.list({ q: `${mark}-none` })).toEqual([]);
        // The index follows changes and deletes.
        await repo.update(byCode.code, { code: code() });
        expect(ids(await repo.list({ q: mark }))).toEqual([byUrl.id]);
        await repo.update(byUrl.code, { url: 'https://example.com/elsewhere' });
        await repo.delete(literal.code);
        expect(await repo.list({ q: mark })).toEqual([]);
        expect(await repo.list({ q: '50%_off' })).toEqual([]);
        // Indexed later, the rows are found with what they hold now.
        while ((await (repo as KyselyUrlMappingRepository).indexSearch(1000)) > 0);
        expect(ids(await repo.list({ q: 'example.com/elsewhere', owner: user }))).toEqual([byUrl.id]);
        expect(await repo.list({ q: mark })).toEqual([]);
      },
    );

    test('sorts by created_at and click_count either way, ties by id, and pages by keyset', async () => {
      const user = owner();
      const times = ['2024-01-03T00:00:00Z', '2024-01-01T00:00:00Z', '2024-01-02T00:00:00Z', '2024-01-01T00:00:00Z'];
      const counts = [5, 9, 5, 0];
      const made: UrlMapping[] = [];
      for (let i = 0; i < times.length; i++) {
        made.push(await repo.create({ ...mapping({ created_at: times[i]!, click_count: counts[i]! }), owner: user }));
      }
      await repo.addClicks([[made[3]!.id, 7]]); // pending clicks count in the order
      const [a, b, c, d] = made.map((m) => m.id) as [number, number, number, number];
      const cases: Array<[Parameters<UrlMappingRepository['list']>[0], number[]]> = [
        [{ sort: { field: 'created_at', descending: false } }, [b, d, c, a]],
        [{ sort: { field: 'created_at', descending: true } }, [a, c, d, b]],
        [{ sort: { field: 'click_count', descending: false } }, [a, c, d, b]],
        [{ sort: { field: 'click_count', descending: true } }, [b, d, c, a]],
        [{ sort: { field: 'id', descending: true } }, [d, c, b, a]],
        [{}, [a, b, c, d]],
      ];
      for (const [options, expected] of cases) {
        expect(ids(await repo.list({ ...options, owner: user }))).toEqual(expected);
        for (const limit of [1, 2, 3])
          expect(ids(await allPages({ ...options, owner: user }, limit))).toEqual(expected);
      }
      // Newest first, with a search and an owner at once.
      const q = `example.com/a`;
      expect(ids(await allPages({ owner: user, q, sort: { field: 'created_at', descending: true } }, 1))).toEqual([
        a,
        c,
        d,
        b,
      ]);
    });

    test('pages through many links of one instant, the pages ending anywhere among them', async () => {
      const user = owner();
      // 12 links of one instant (as an import without created_at gives them) between two others.
      const times = ['2024-06-01T00:00:00Z', ...Array(12).fill('2024-06-02T00:00:00Z'), '2024-06-03T00:00:00Z'];
      const made: UrlMapping[] = [];
      for (const created_at of times) made.push(await repo.create({ ...mapping({ created_at }), owner: user }));
      const oldestFirst = ids(made); // created in time order, ties in id order
      for (const descending of [false, true]) {
        const want = descending ? [...oldestFirst].reverse() : oldestFirst;
        const sort = { field: 'created_at', descending } as const;
        for (const limit of [1, 4, 5, 13, 14]) {
          expect(ids(await allPages({ owner: user, sort }, limit))).toEqual(want);
          expect(ids(await allPages({ owner: user, q: 'example.com', sort }, limit))).toEqual(want);
        }
        // A page from the middle of the ties.
        const [, anchorId] = want;
        const page = await repo.list({ after: anchorId, limit: 3, sort, owner: user });
        expect(ids(page)).toEqual(want.slice(2, 5));
      }
    });

    test('orders instants within one second as time does, fractions of any length', async () => {
      const user = owner();
      // Canonical forms drop trailing zeros: as text, ".5Z" sorts after ".52Z" and "Z" after both.
      const times = [
        '2024-05-01T10:00:00.52Z',
        '2024-05-01T10:00:00Z',
        '2024-05-01T10:00:00.5Z',
        '2024-05-01T10:00:00.000001Z',
        '2024-05-01T10:00:00.999999Z',
        '2024-05-01T09:59:59.9Z',
        '2024-05-01T10:00:00.05Z',
        '2024-05-01T10:00:01Z',
      ];
      const made: UrlMapping[] = [];
      for (const created_at of times) made.push(await repo.create({ ...mapping({ created_at }), owner: user }));
      /** Microseconds since the epoch, for the order expected (Date.parse keeps milliseconds only). */
      const micros = (t: string) =>
        Date.parse(`${t.slice(0, 19)}Z`) * 1000 + Number(`${t.slice(20, -1)}000000`.slice(0, 6));
      const expected = ids([...made].sort((x, y) => micros(x.created_at) - micros(y.created_at)));
      expect(made.map((m) => m.created_at)).toEqual(times);
      const q = 'example.com';
      for (const descending of [false, true]) {
        const want = descending ? [...expected].reverse() : expected;
        const sort = { field: 'created_at', descending } as const;
        expect(ids(await repo.list({ owner: user, sort }))).toEqual(want);
        for (const limit of [1, 3]) expect(ids(await allPages({ owner: user, sort }, limit))).toEqual(want);
        expect(ids(await allPages({ owner: user, q, sort }, 2))).toEqual(want);
      }
    });
  });

  describe('lifecycle limits', () => {
    const test = it.skipIf(!backend.available);
    /** A second repository over connections of its own on PostgreSQL (another instance); SQLite: the same. */
    const secondRepository = () => {
      if (database.dialect === 'sqlite') return { other: repo, close: async () => undefined };
      const opened = openDatabase(testConfig(testDb.databaseUrl).database);
      return { other: new KyselyUrlMappingRepository(opened.db, opened.dialect), close: () => opened.close() };
    };
    const expired: ExpiredEventFor = (m, reason) => ({
      topic: 'url_events',
      key: String(m.id),
      envelope: {
        event_id: `${m.code}-${reason}`,
        event_type: 'url.expired',
        event_version: 1,
        occurred_at: '',
        service: 't',
        payload: { ...m, reason },
      },
    });

    test('creates, reads, changes and clears expires_at and max_visits; rows without them have neither', async () => {
      const expiresAt = new Date('2099-01-02T03:04:05.678Z');
      const created = await repo.create({ ...mapping(), expiresAt, maxVisits: 7 });
      expect(created).toMatchObject({ expires_at: '2099-01-02T03:04:05.678Z', max_visits: 7 });
      expect(await repo.findByCode(created.code)).toEqual(created);
      const changed = await repo.update(created.code, { maxVisits: 9, expiresAt: null });
      expect(changed).toEqual({ ...created, max_visits: 9, expires_at: undefined });
      expect(changed).not.toHaveProperty('expires_at');
      const cleared = await repo.update(created.code, { maxVisits: null });
      expect(cleared).not.toHaveProperty('max_visits');
      // A null spec field still leaves it as it is.
      expect(await repo.update(created.code, { url: null })).toEqual(cleared);
    });

    test('exactly max_visits reservations are granted among concurrent ones from two instances', async () => {
      const m = await repo.create({ ...mapping(), maxVisits: 10 });
      const { other, close } = secondRepository();
      try {
        const answers = await Promise.all(
          Array.from({ length: 40 }, (_, i) => (i % 2 ? repo : other).reserveVisit(m.id)),
        );
        expect(answers.filter((r) => r.granted)).toHaveLength(10);
        expect(
          answers
            .filter((r) => r.granted)
            .map((r) => r.remaining)
            .sort((x, y) => x - y),
        ).toEqual(Array.from({ length: 10 }, (_, i) => i));
      } finally {
        await close();
      }
      // No limit, no link, or past its time: never granted.
      const free = await repo.create(mapping());
      expect(await repo.reserveVisit(free.id)).toEqual({ granted: false, remaining: 0 });
      expect(await repo.reserveVisit(987654321)).toEqual({ granted: false, remaining: 0 });
      const old = await repo.create({ ...mapping(), maxVisits: 5 });
      await repo.update(old.code, { expiresAt: new Date('2020-01-01T00:00:00Z') });
      expect((await repo.reserveVisit(old.id)).granted).toBe(false);
    });

    test('a limit set on a link with clicks starts from its count; raised, it keeps the visits used', async () => {
      const m = await repo.create(mapping({ click_count: 3 }));
      await repo.addClicks([[m.id, 2]]);
      await repo.update(m.code, { maxVisits: 6 });
      expect(await repo.reserveVisit(m.id)).toEqual({ granted: true, remaining: 0 });
      expect((await repo.reserveVisit(m.id)).granted).toBe(false);
      await repo.update(m.code, { maxVisits: 8 });
      expect(await repo.reserveVisit(m.id)).toEqual({ granted: true, remaining: 1 });
    });

    test('expireDue claims each link past its time once, whichever instances sweep at once', async () => {
      const past = new Date(Date.now() - 5000);
      const due: number[] = [];
      for (let i = 0; i < 30; i++) {
        const m = await repo.create({ ...mapping(), expiresAt: new Date(Date.now() + 60_000) });
        await database.db
          .updateTable('url_mappings')
          .set({ expires_at: past.toISOString() })
          .where('id', '=', m.id)
          .execute();
        due.push(m.id);
      }
      const future = await repo.create({ ...mapping(), expiresAt: new Date(Date.now() + 60_000) });
      const { other, close } = secondRepository();
      try {
        const claimed = await Promise.all([repo, other, repo, other].map((r) => r.expireDue(7, expired)));
        let total = claimed.reduce((sum, n) => sum + n, 0);
        for (let n = await repo.expireDue(100, expired); n > 0; n = await repo.expireDue(100, expired)) total += n;
        expect(total).toBe(30);
        expect(await other.expireDue(100, expired)).toBe(0);
      } finally {
        await close();
      }
      const rows = await database.db
        .selectFrom('url_mappings')
        .select(['id', 'expired_event_at'])
        .where('id', 'in', [...due, future.id])
        .execute();
      for (const row of rows) expect(row.expired_event_at === null).toBe(row.id === future.id);
    });
  });

  it.skipIf(!backend.available)('migrations are idempotent', async () => {
    expect((await migrateToLatest(database.db, database.dialect)).applied).toEqual([]);
  });
});
