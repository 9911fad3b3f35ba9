import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import { KyselyLinkImportStore } from '../../src/adapters/storage/kysely-link-import-store.js';
import { KyselyUrlMappingRepository } from '../../src/adapters/storage/kysely-url-mapping-repository.js';
import type { UrlMapping } from '../../src/domain/url-mapping.js';
import type { UrlMappingRepository } from '../../src/ports/url-mapping-repository.js';
import { LinkTransferService } from '../../src/services/link-transfer-service.js';
import { UrlMappingService } from '../../src/services/url-mapping-service.js';
import { ClickBuffer } from '../../src/support/click-buffer.js';
import { RedirectCache } from '../../src/support/redirect-cache.js';
import { BACKENDS, testConfig } from '../helpers/backends.js';
import { gate } from '../helpers/gate.js';
import { useOpenDatabase } from '../helpers/storage.js';
import { storedClicks } from '../helpers/stored-clicks.js';

/**
 * The clicks a read shows are the stored ones plus this instance's unwritten ones. A chunk of
 * clicks committing while a read is under way must not make them count twice or not at all:
 * each test holds one side at the exact moment that used to go wrong, on the real database.
 */
describe.each(BACKENDS)('click counts read while clicks are written, on $name', (backend) => {
  const { database, testDatabase } = useOpenDatabase(backend);
  let repo: KyselyUrlMappingRepository;
  let n = 0;
  const create = (click_count = 0) =>
    repo.create({
      code: `f${String(++n).padStart(6, '0')}`,
      url: 'https://example.com/a',
      created_at: '2024-01-01T00:00:00Z',
      click_count,
    });

  /** The service over `repository` (the real one unless a test holds a call back), never flushing by itself. */
  function service(repository: UrlMappingRepository = repo) {
    const clicks = new ClickBuffer(repository, { flushIntervalMs: 60_000, compactIntervalMs: 60_000 });
    const urls = new UrlMappingService(repository, new RedirectCache(1000, 60_000, 1000), clicks, {
      rules: testConfig(testDatabase.databaseUrl).urls,
      reservedCodes: () => new Set(),
    });
    const transfer = new LinkTransferService(repository, new KyselyLinkImportStore(database.db, database.dialect), {
      rules: testConfig(testDatabase.databaseUrl).urls,
      reservedCodes: () => new Set(),
      counts: clicks,
    });
    return { clicks, urls, transfer };
  }

  /** The repository whose click writes commit, then wait to be released before they return. */
  function holdingAfterCommit() {
    const committed = gate();
    const held = gate();
    const slow = Object.create(repo, {
      addClicks: {
        value: async (...args: Parameters<UrlMappingRepository['addClicks']>) => {
          await repo.addClicks(...args);
          committed.open();
          await held.opened;
        },
      },
    }) as UrlMappingRepository;
    /**
     * Lets the chunk return once `answer` (a read made after the chunk committed) is given, or
     * after a while: a read that waits for the chunk is not given first. Whether it was.
     */
    const release = async (answer: Promise<unknown>) => {
      const answeredFirst = await Promise.race([answer.then(() => true), sleep(200).then(() => false)]);
      held.open();
      return answeredFirst;
    };
    return { slow, committed, release };
  }

  const click = async (urls: UrlMappingService, code: string, times: number) => {
    for (let i = 0; i < times; i++) await urls.resolve(code, true);
  };
  const listed = async (urls: UrlMappingService, id: number) =>
    (await urls.list({ after: id - 1, limit: 1 })).mappings.find((m) => m.id === id)?.click_count;

  beforeAll(() => {
    if (backend.available)
      repo = new KyselyUrlMappingRepository(database.db, database.dialect, undefined, database.reader);
  });

  /** The reads that show counts, each made once a chunk has committed and before it returns. */
  const afterCommit: {
    name: string;
    clicks: number;
    read: (s: ReturnType<typeof service>, mapping: UrlMapping) => Promise<number | undefined>;
  }[] = [
    { name: 'a listing', clicks: 3, read: ({ urls }, mapping) => listed(urls, mapping.id) },
    {
      name: "a PATCH's answer",
      clicks: 2,
      read: async ({ urls }, mapping) =>
        (await urls.update(mapping.code, { url: 'https://example.com/b' })).click_count,
    },
    {
      name: 'an export page',
      clicks: 4,
      read: async ({ transfer }, mapping) => {
        for await (const record of transfer.exportLinks()) if (record.code === mapping.code) return record.click_count;
        return undefined;
      },
    },
  ];

  for (const { name, clicks: clicked, read } of afterCommit) {
    it.skipIf(!backend.available)(
      `${name} made once a chunk has committed, before it returns, counts each click once`,
      async () => {
        const mapping = await create(10);
        const { slow, committed, release } = holdingAfterCommit();
        const made = service(slow);
        await click(made.urls, mapping.code, clicked);
        const flushed = made.clicks.flush();
        await committed.opened; // stored: 10 + clicked; the chunk has not returned, so its clicks are still pending
        const shown = read(made, mapping);
        const answeredFirst = await release(shown);
        await flushed;
        expect(await shown).toBe(10 + clicked);
        expect(answeredFirst).toBe(false); // the read waited for the chunk
        expect(await storedClicks(database.db, mapping)).toBe(10 + clicked);
      },
    );
  }

  it.skipIf(!backend.available)(
    'a listing whose read ended before a chunk committed counts each click once',
    async () => {
      const mapping = await create(10);
      const read = gate();
      const held = gate();
      let writes = 0;
      const slow = Object.create(repo, {
        list: {
          value: async (...args: Parameters<UrlMappingRepository['list']>) => {
            const rows = await repo.list(...args);
            read.open();
            await held.opened; // has read 10 stored; the clicks are pending
            return rows;
          },
        },
        addClicks: {
          value: (...args: Parameters<UrlMappingRepository['addClicks']>) => {
            writes++;
            return repo.addClicks(...args);
          },
        },
      }) as UrlMappingRepository;
      const { clicks, urls } = service(slow);
      await click(urls, mapping.code, 3);
      const listing = listed(urls, mapping.id);
      await read.opened;
      const flushed = clicks.flush();
      await Promise.race([flushed, sleep(200)]); // time enough for a flush that did not wait
      const writesDuringRead = writes;
      held.open();
      expect(await listing).toBe(13);
      expect(writesDuringRead).toBe(0); // the chunk waited for the read under way
      await flushed;
      expect(writes).toBe(1);
      expect(await storedClicks(database.db, mapping)).toBe(13);
      expect(await listed(urls, mapping.id)).toBe(13);
    },
  );

  it.skipIf(!backend.available)(
    'under clicks, flushes and listings all at once, every listing shows between the clicks before it began and those after it ended',
    async () => {
      const mapping = await create();
      const { clicks, urls } = service();
      clicks.start({ error: (object) => expect.fail(String(object)) });
      let counted = 0; // clicks recorded so far
      const failures: string[] = [];
      const until = Date.now() + 1_500;
      const clicker = async () => {
        while (Date.now() < until) {
          await urls.resolve(mapping.code, true);
          counted++;
          if (counted % 25 === 0) await sleep(0);
        }
      };
      const flusher = async () => {
        while (Date.now() < until) {
          await clicks.flush();
          await sleep(1);
        }
      };
      let listings = 0;
      const lister = async () => {
        while (Date.now() < until) {
          const before = counted;
          const seen = await listed(urls, mapping.id);
          const after = counted;
          listings++;
          if (seen === undefined || seen < before || seen > after) failures.push(`${before} <= ${seen} <= ${after}`);
        }
      };
      await Promise.all([clicker(), flusher(), lister(), lister(), lister()]);
      await clicks.stop();
      expect(failures).toEqual([]);
      expect(listings).toBeGreaterThan(20);
      expect(await storedClicks(database.db, mapping)).toBe(counted);
    },
  );
});
