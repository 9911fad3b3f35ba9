import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { PreparedRows } from '../../src/adapters/storage/prepared-query.js';
import type { DatabaseSchema } from '../../src/adapters/storage/schema.js';
import { BACKENDS } from '../helpers/backends.js';
import { useOpenDatabase } from '../helpers/storage.js';

interface Item {
  readonly n: number;
  readonly label: string | null;
}

/** Multi-row inserts compiled once for each row count they meet, on both backends. */
describe.each(BACKENDS)('PreparedRows on $name', (backend) => {
  const { database } = useOpenDatabase(backend, { migrate: false });

  it.skipIf(!backend.available)(
    'inserts every row of batches of any size, one statement for up to maxRows, compiling each size once',
    async () => {
      const { db } = database;
      await sql`CREATE TABLE prepared_rows_items (n INTEGER NOT NULL, label TEXT)`.execute(db);
      const built: number[] = [];
      const insert = new PreparedRows<DatabaseSchema, Item>(db, 50, (db, count, slot) => {
        built.push(count);
        // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a table of this test's own
        return (db as any)
          .insertInto('prepared_rows_items')
          .values(Array.from({ length: count }, (_, i) => ({ n: slot(i, 'n'), label: slot(i, 'label') })));
      });
      const statements: string[] = [];
      const counted = db.withPlugin({
        transformQuery: (args) => args.node,
        transformResult: async (args) => {
          statements.push(args.queryId.queryId);
          return args.result;
        },
      });
      let next = 0;
      const batch = (size: number): Item[] =>
        Array.from({ length: size }, () => ({ n: next++, label: next % 3 === 0 ? null : `item ${next}` }));
      const sizes = [0, 1, 7, 50, 7, 123, 1];
      const written: Item[] = [];
      for (const size of sizes) {
        const rows = batch(size);
        await insert.run(counted, rows);
        written.push(...rows);
      }
      // 123 rows: 50, 50 and 23; the sizes met once each.
      expect(statements).toHaveLength(1 + 1 + 1 + 1 + 3 + 1);
      expect(built).toEqual([1, 7, 50, 23]);
      const stored = await sql<Item>`SELECT n, label FROM prepared_rows_items ORDER BY n`.execute(db);
      expect(stored.rows.map((r) => ({ n: Number(r.n), label: r.label }))).toEqual(written);
    },
  );
});
