/**
 * The SQLite file locked by another process past the busy timeout (a backup tool, `urlshortener
 * import`, another instance on the file): every change answers 503 `{"detail": "Database
 * unavailable"}` (worth a retry), not 500, about one busy timeout (5 s) after it came, and stores
 * nothing; reads go on meanwhile; once the lock is let go, the same changes succeed.
 */
import SQLite from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { sqlite, useTestDatabase } from '../helpers/backends.js';
import {
  codeMaker,
  createMapping,
  expectError,
  HTTP_TEST_ENV,
  newMapping,
  patchMapping,
  postShorten,
} from '../helpers/http.js';

describe('the SQLite file locked by another process', () => {
  const database = useTestDatabase(sqlite);
  const t = useTestApp(sqlite, HTTP_TEST_ENV, { database });
  const nextCode = codeMaker('lck');

  it('changes answer 503 Database unavailable within the busy timeout and store nothing; reads go on; then they succeed', async () => {
    const [changed, deleted] = [
      await createMapping(t.app, newMapping(nextCode)),
      await createMapping(t.app, newMapping(nextCode)),
    ];
    const holder = new SQLite(database.databaseUrl.slice('sqlite:'.length));
    holder.exec('BEGIN IMMEDIATE');
    const order: string[] = [];
    const changes = Promise.all(
      [
        patchMapping(t.app, changed.code, { url: 'https://example.com/while-locked' }),
        t.app.inject({ method: 'DELETE', url: `/${deleted.code}` }),
        postShorten(t.app, newMapping(nextCode)),
      ].map((answer) => answer.finally(() => order.push('change'))),
    );
    try {
      // Reads do not wait for the write lock, nor behind the writes waiting for it: a redirect,
      // and a listing (which shares the connection the writes wait on).
      const redirect = await t.app.inject({ url: `/${changed.code}` });
      expect(redirect.statusCode).toBe(302);
      const listed = await t.app.inject({ url: '/urls?limit=5' });
      order.push('list');
      expect(listed.statusCode, listed.body).toBe(200);
      // Held past one busy timeout, short of two: a change still waiting when it is let go (one
      // that queued behind another's wait) would be made after all.
      await Promise.race([changes, new Promise((resolve) => setTimeout(resolve, 8_000))]);
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
    const answers = await changes;
    expect(order).toEqual(['list', 'change', 'change', 'change']);
    for (const answer of answers) expectError(answer, 503, 'Database unavailable');

    expect((await t.app.inject({ url: `/${changed.code}` })).headers.location).toBe(changed.url);
    expect((await t.app.inject({ url: `/${deleted.code}` })).statusCode).toBe(302);
    const patched = await patchMapping(t.app, changed.code, { url: 'https://example.com/after-the-lock' });
    expect(patched.statusCode, patched.body).toBe(200);
    expect((await t.app.inject({ method: 'DELETE', url: `/${deleted.code}` })).statusCode).toBe(204);
  }, 30_000);
});
