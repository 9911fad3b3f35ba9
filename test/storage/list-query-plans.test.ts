import { type CompiledQuery, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { KyselyUrlMappingRepository } from '../../src/adapters/storage/kysely-url-mapping-repository.js';
import type { ListOptions } from '../../src/ports/url-mapping-repository.js';
import { sqlite } from '../helpers/backends.js';
import { useOpenDatabase } from '../helpers/storage.js';

/**
 * SQLite's list by `created_at` sorts an expression of the column (instant-order.ts), which only
 * migration 0062's indexes hold, and SQLite uses an index on an expression only where a query
 * spells it the same way, and for a range only in a plain comparison. Each page is read from the
 * index, from its first row or from its keyset anchor on: never the whole table walked or sorted.
 */
describe('GET /urls newest first on SQLite: the plans', () => {
  const logged: CompiledQuery[] = [];
  const { database } = useOpenDatabase(sqlite, {
    log: (event) => {
      if (event.level === 'query') logged.push(event.query);
    },
  });

  /** A plan that reads `range` of `index` in order, sorting nothing after (an asymmetric matcher). */
  const reads = (index: string, range: string) =>
    expect.stringMatching(
      new RegExp(
        `^SEARCH url_mappings USING INDEX ${index} \\(${range.replace(/[?()]/g, (c) => `\\${c}`)}\\)(?!.*TEMP B-TREE)`,
      ),
    );

  /** The plan of every statement `options`' list runs. */
  async function plans(options: ListOptions): Promise<string[]> {
    const repo = new KyselyUrlMappingRepository(database.db, database.dialect);
    logged.length = 0;
    await repo.list(options);
    const statements = logged.splice(0);
    const details: string[] = [];
    for (const query of statements) {
      const explained = sql<{ detail: string }>`EXPLAIN QUERY PLAN ${sql.raw(query.sql)}`.compile(database.db);
      const { rows } = await database.db.executeQuery<{ detail: string }>({
        ...explained,
        parameters: query.parameters,
      });
      details.push(rows.map((row) => row.detail).join(' | '));
    }
    return details;
  }

  it('reads a page from its index, first or after an anchor, with or without an owner', async () => {
    const repo = new KyselyUrlMappingRepository(database.db, database.dialect);
    for (let i = 0; i < 30; i++) {
      const created_at = `2024-05-01T10:00:${String(i).padStart(2, '0')}.${i}Z`;
      await repo.create({ code: `plan${i}xx`, url: 'https://example.com/', created_at, click_count: 0, owner: i % 2 });
    }
    for (const descending of [true, false]) {
      const sort = { field: 'created_at', descending } as const;
      const bound = descending ? '<' : '>';
      expect(await plans({ limit: 10, sort })).toEqual([
        expect.stringMatching(/^SCAN url_mappings USING INDEX url_mappings_created_order\b/),
      ]);
      // After an anchor: its ties beyond its id, then the keys beyond its key; each a range.
      expect(await plans({ limit: 10, after: 12, sort })).toEqual([
        reads('url_mappings_created_order', `<expr>=? AND id${bound}?`),
        reads('url_mappings_created_order', `<expr>${bound}?`),
      ]);
      expect(await plans({ limit: 10, owner: 1, after: 12, sort })).toEqual([
        reads('url_mappings_owner_created_order', `owner_id=? AND <expr>=? AND id${bound}?`),
        reads('url_mappings_owner_created_order', `owner_id=? AND <expr>${bound}?`),
      ]);
    }
    for (const plan of await plans({
      limit: 10,
      owner: 1,
      q: 'example',
      sort: { field: 'created_at', descending: true },
    }))
      expect(plan).toMatch(/USING INDEX url_mappings_owner_created_order \(owner_id=\?\)/);
  });
});
