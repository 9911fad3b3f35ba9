import { beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/adapters/storage/database.js';
import { KyselyUrlMappingRepository } from '../../src/adapters/storage/kysely-url-mapping-repository.js';
import { migrateToLatest } from '../../src/adapters/storage/migrations.js';
import { AppError } from '../../src/domain/errors.js';
import type { UrlMapping } from '../../src/domain/url-mapping.js';
import type { UrlMappingRepository } from '../../src/ports/url-mapping-repository.js';
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
    expect(created).toEqual({ id: expect.any(Number), ...input });
    expect(await repo.findByCode(input.code)).toEqual(created);
    expect(await repo.findTarget(input.code)).toEqual({ id: created.id, url: input.url });
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

  it.skipIf(!backend.available)('migrations are idempotent', async () => {
    expect((await migrateToLatest(database.db, database.dialect)).applied).toEqual([]);
  });
});
