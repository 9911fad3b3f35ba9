import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import { KyselyUrlMappingRepository } from '../../src/adapters/storage/kysely-url-mapping-repository.js';
import { migrateToLatest } from '../../src/adapters/storage/migrations.js';
import { AppError } from '../../src/domain/errors.js';
import type { UrlMappingRepository } from '../../src/ports/url-mapping-repository.js';
import { BACKENDS, type TestDatabase, testConfig } from '../helpers/backends.js';

/** One contract, every storage adapter. */
describe.each(BACKENDS)('UrlMappingRepository on $name', (backend) => {
  let testDb: TestDatabase;
  let database: Database;
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

  beforeAll(async () => {
    if (!backend.available) return;
    testDb = await backend.create();
    database = openDatabase(testConfig(testDb.databaseUrl).database);
    await migrateToLatest(database.db, database.dialect);
    repo = new KyselyUrlMappingRepository(database.db, database.dialect);
  });
  afterAll(async () => {
    await database?.close();
    await testDb?.drop();
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

  it.skipIf(!backend.available)('migrations are idempotent', async () => {
    expect((await migrateToLatest(database.db, database.dialect)).applied).toEqual([]);
  });
});
