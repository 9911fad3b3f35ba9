import { beforeAll, describe, expect, it } from 'vitest';
import { KyselyUrlMappingRepository } from '../../src/adapters/storage/kysely-url-mapping-repository.js';
import { UrlMappingService } from '../../src/services/url-mapping-service.js';
import { ClickBuffer } from '../../src/support/click-buffer.js';
import { RedirectCache } from '../../src/support/redirect-cache.js';
import { randomCode } from '../../src/support/short-codes.js';
import { BACKENDS, testConfig } from '../helpers/backends.js';
import { useOpenDatabase } from '../helpers/storage.js';

/** `create` without a code (issue 14 item 3): collisions and reserved words are tried again. */
describe.each(BACKENDS)('generated codes on $name', (backend) => {
  const { database, testDatabase } = useOpenDatabase(backend);
  let repo: KyselyUrlMappingRepository;

  beforeAll(() => {
    if (backend.available) repo = new KyselyUrlMappingRepository(database.db, database.dialect);
  });

  /** A service whose generator answers `codes` in turn, recording the lengths asked for. */
  function serviceGenerating(codes: string[], asked: number[] = []) {
    const clicks = new ClickBuffer(repo, { flushIntervalMs: 60_000, compactIntervalMs: 60_000 });
    return new UrlMappingService(repo, new RedirectCache(100, 60_000, 1000), clicks, {
      rules: testConfig(testDatabase.databaseUrl).urls,
      reservedCodes: () => new Set(['metrics', 'shorten']),
      codeLength: 7,
      generateCode: (length) => {
        asked.push(length);
        const next = codes.shift();
        if (next === undefined) throw new Error('no more codes');
        return next;
      },
    });
  }

  it.skipIf(!backend.available)('a taken code and a reserved word are skipped for the next code', async () => {
    await repo.create({
      code: 'Taken01',
      url: 'https://example.com/t',
      created_at: '2024-01-01T00:00:00Z',
      click_count: 0,
    });
    const asked: number[] = [];
    const service = serviceGenerating(['Taken01', 'MeTrIcS', 'Fresh01'], asked);
    const created = await service.create({ url: 'https://example.com/new' });
    expect(created).toMatchObject({ code: 'Fresh01', url: 'https://example.com/new', click_count: 0 });
    expect(asked).toEqual([7, 7, 7]);
    expect((await repo.findByCode('Taken01'))?.url).toBe('https://example.com/t');
  });

  it.skipIf(!backend.available)('gives up with a 503 after ten collisions', async () => {
    await repo.create({
      code: 'Taken02',
      url: 'https://example.com/t',
      created_at: '2024-01-01T00:00:00Z',
      click_count: 0,
    });
    const service = serviceGenerating(Array(10).fill('Taken02'));
    await expect(service.create({ url: 'https://example.com/x' })).rejects.toMatchObject({
      statusCode: 503,
      detail: 'No free code found; try again',
    });
  });
});

describe('randomCode', () => {
  it('makes codes of the length asked, of letters and digits, all of them used', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const code = randomCode(7);
      expect(code).toMatch(/^[A-Za-z0-9]{7}$/);
      for (const c of code) seen.add(c);
    }
    expect(seen.size).toBe(62);
    expect(randomCode(10)).toHaveLength(10);
  });
});
