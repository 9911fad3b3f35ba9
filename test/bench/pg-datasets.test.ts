/**
 * The bench's PostgreSQL datasets: at 1,000 mappings every target gets a schema of its own,
 * loaded, so that no target's consumers, visit fold or created rows reach another's (the SQLite
 * targets each get a copy of the file for the same reason). Needs dist/ (the loader migrates with
 * `dist/cli.js migrate`, as the bench does); `npm test` builds it first.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { connectClient, postgresBackend } from '../../bench/lib/datasets.js';
import { DATASET_SIZES } from '../../bench/lib/settings.js';
import { POSTGRES_URL, postgresAvailable } from '../helpers/services.js';

async function query<T>(databaseUrl: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = await connectClient(databaseUrl);
  try {
    return (await client.query(text, values)).rows as T[];
  } finally {
    await client.end();
  }
}

const schemasLike = async (prefix: string) =>
  (
    await query<{ name: string }>(POSTGRES_URL, 'SELECT nspname AS name FROM pg_namespace WHERE nspname LIKE $1', [
      `${prefix}%`,
    ])
  )
    .map((r) => r.name)
    .sort();

describe("the bench's PostgreSQL datasets", () => {
  it.skipIf(!postgresAvailable)(
    'at 1,000 mappings: a loaded schema for each target, written apart, dropped with its target',
    async () => {
      const prefix = `test_bench_${randomBytes(3).toString('hex')}`;
      const size = DATASET_SIZES.find((s) => s.mappings === 1_000)!;
      try {
        const dataset = await postgresBackend(POSTGRES_URL, prefix).open(size, () => {});
        const a = await dataset.isolate('default');
        const b = await dataset.isolate('no-visits');
        expect(await schemasLike(prefix)).toEqual([`${prefix}_1k`, `${prefix}_1k_default`, `${prefix}_1k_no_visits`]);
        for (const target of [a, b]) {
          const [row] = await query<{ n: string }>(target.databaseUrl, 'SELECT count(*) AS n FROM url_mappings');
          expect(Number(row?.n)).toBe(size.mappings);
        }
        // A row created by one target is not the other's.
        await query(
          a.databaseUrl,
          `INSERT INTO url_mappings (code, url, created_at, click_count) VALUES ($1, $2, $3, 0)`,
          ['1abtest', 'https://example.com/ab', '2026-01-01T00:00:00Z'],
        );
        expect(await a.countCreated('1ab')).toBe(1);
        expect(await b.countCreated('1ab')).toBe(0);
        await a.drop();
        expect(await schemasLike(prefix)).toEqual([`${prefix}_1k`, `${prefix}_1k_no_visits`]);
        await b.drop();
        expect(await schemasLike(prefix)).toEqual([`${prefix}_1k`]);
      } finally {
        for (const schema of await schemasLike(prefix)) await query(POSTGRES_URL, `DROP SCHEMA ${schema} CASCADE`);
      }
    },
    60_000,
  );
});
