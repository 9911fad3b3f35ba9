import { beforeAll, describe, expect, it } from 'vitest';
import { KyselyUrlMappingRepository } from '../../src/adapters/storage/kysely-url-mapping-repository.js';
import { BatchedTargetLookup, type CodedTarget } from '../../src/adapters/storage/target-lookup.js';
import { AppError } from '../../src/domain/errors.js';
import type { UrlMappingRepository } from '../../src/ports/url-mapping-repository.js';
import { ClickBuffer } from '../../src/support/click-buffer.js';
import { RedirectCache } from '../../src/support/redirect-cache.js';
import { UrlMappingService } from '../../src/services/url-mapping-service.js';
import { BACKENDS, testConfig } from '../helpers/backends.js';
import { gate } from '../helpers/gate.js';
import { useOpenDatabase } from '../helpers/storage.js';

describe.each(BACKENDS)('cache misses on $name', (backend) => {
  const { database, testDatabase: testDb } = useOpenDatabase(backend);
  let repo: KyselyUrlMappingRepository;
  let n = 0;
  const create = (url = 'https://example.com/old') =>
    repo.create({ code: `m${String(++n).padStart(6, '0')}`, url, created_at: '2024-01-01T00:00:00Z', click_count: 0 });

  /** The service over `repository`, with its own cache. */
  function service(repository: UrlMappingRepository) {
    const cache = new RedirectCache(1000, 60_000, 1000);
    const clicks = new ClickBuffer(repository, { flushIntervalMs: 60_000, compactIntervalMs: 60_000 });
    const urls = new UrlMappingService(repository, cache, clicks, {
      rules: testConfig(testDb.databaseUrl).urls,
      reservedCodes: () => new Set(),
    });
    return { cache, clicks, urls };
  }

  beforeAll(() => {
    if (backend.available)
      repo = new KyselyUrlMappingRepository(database.db, database.dialect, undefined, database.reader);
  });

  it.skipIf(!backend.available)('misses of one turn are answered by one statement', async () => {
    const stored = await Promise.all(Array.from({ length: 40 }, () => create()));
    const statements: (readonly string[])[] = [];
    const lookup = new BatchedTargetLookup((codes) => {
      statements.push(codes);
      return repo.findTargets(codes);
    });
    const codes = [...stored.map((m) => m.code), 'unknown1', stored[0]!.code];
    const found = await Promise.all(codes.map((code) => lookup.find(code)));
    expect(statements).toHaveLength(1);
    expect(statements[0]).toHaveLength(41); // each code once
    // Each target with the lifecycle limits the redirect path checks (none here).
    const target = (m: { id: number; url: string }) => ({
      id: m.id,
      url: m.url,
      expires_at: null,
      max_visits: null,
      visits_used: 0,
    });
    expect(found.slice(0, 40)).toEqual(stored.map(target));
    expect(found[40]).toBeUndefined();
    expect(found[41]).toEqual(target(stored[0]!));
  });

  it.skipIf(!backend.available)(
    'a miss whose statement read the row before a DELETE committed does not put it back in the cache',
    async () => {
      const mapping = await create();
      const held = gate();
      const read = gate();
      const lookup = new BatchedTargetLookup(async (codes: readonly string[]): Promise<readonly CodedTarget[]> => {
        const rows = await repo.findTargets(codes);
        read.open();
        await held.opened;
        return rows;
      });
      // The repository as the service sees it, its redirect lookups through the held batch.
      const slow = Object.create(repo, { findTarget: { value: (code: string) => lookup.find(code) } });
      const { cache, urls } = service(slow as UrlMappingRepository);

      const racing = urls.resolve(mapping.code, true);
      await read.opened; // the statement has read the mapping, not yet answered
      await urls.delete(mapping.code);
      held.open();
      // The request that raced the DELETE may have the old target (it began before the DELETE returned)...
      expect(await racing).toMatchObject({ id: mapping.id, location: mapping.url });
      // ...but nothing after the DELETE returned gets it: not from the cache, not from the database.
      expect(cache.peek(mapping.code)).toBeUndefined();
      await expect(Promise.resolve().then(() => urls.resolve(mapping.code, true))).rejects.toMatchObject(
        new AppError('MAPPING_NOT_FOUND', 404, 'URL mapping not found'),
      );
    },
  );

  it.skipIf(!backend.available)('after DELETE or PATCH returns, the old target is never served', async () => {
    const { urls } = service(repo);
    const deleted = await create();
    const changed = await create();
    // Cached first, then changed.
    expect(await urls.resolve(deleted.code, true)).toMatchObject({ location: deleted.url });
    expect(await urls.resolve(changed.code, true)).toMatchObject({ location: changed.url });
    await urls.delete(deleted.code);
    await urls.update(changed.code, { url: 'https://example.com/new' });
    await expect(Promise.resolve().then(() => urls.resolve(deleted.code, true))).rejects.toBeInstanceOf(AppError);
    expect(await urls.resolve(changed.code, true)).toMatchObject({ location: 'https://example.com/new' });
  });

  it.skipIf(!backend.available || backend.name !== 'sqlite')(
    'SQLite: a miss while the serving connection has a transaction open answers what is committed, and the serving connection answers otherwise',
    async () => {
      const changed = await create();
      const reader = database.reader!;
      // No transaction open: the serving connection itself (its page cache survives its own commits).
      expect(reader().readonly).toBe(false);
      const held = gate();
      const inside = gate();
      let added = '';
      const writing = database.db.transaction().execute(async (trx) => {
        await trx
          .updateTable('url_mappings')
          .set({ url: 'https://example.com/uncommitted' })
          .where('id', '=', changed.id)
          .execute();
        added = `m${String(++n).padStart(6, '0')}`;
        await trx
          .insertInto('url_mappings')
          .values({ code: added, url: 'https://example.com/added', created_at: '2024-01-01T00:00:00Z', click_count: 0 })
          .execute();
        inside.open();
        await held.opened;
      });
      await inside.opened;
      // The transaction is open across awaits: lookups go to the read-only connection, which sees none of it.
      expect(reader().readonly).toBe(true);
      expect(repo.findTarget(changed.code)).toMatchObject({ id: changed.id, url: changed.url });
      expect(repo.findTarget(added)).toBeUndefined();
      held.open();
      await writing;
      expect(reader().readonly).toBe(false);
      expect(repo.findTarget(changed.code)).toMatchObject({ id: changed.id, url: 'https://example.com/uncommitted' });
      expect(repo.findTarget(added)).toMatchObject({ url: 'https://example.com/added' });
    },
  );

  const sync = backend.name === 'sqlite';
  it.skipIf(!backend.available)(
    sync
      ? 'SQLite answers a miss at once, without a promise'
      : 'PostgreSQL answers a miss through the gathered statement',
    async () => {
      const mapping = await create();
      const { cache, urls } = service(repo);
      const answer = urls.resolve(mapping.code, true);
      expect(answer instanceof Promise).toBe(!sync);
      expect(await answer).toEqual({ id: mapping.id, location: mapping.url });
      expect(cache.peek(mapping.code)).toEqual({ id: mapping.id, location: mapping.url });
      if (sync) expect(() => urls.resolve('unknown2', true)).toThrow(AppError);
      else await expect(urls.resolve('unknown2', true)).rejects.toBeInstanceOf(AppError);
      expect(cache.peek('unknown2')).toBeNull(); // the negative entry
    },
  );
});
