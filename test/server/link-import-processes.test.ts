/**
 * Two service processes on one database each answer an import of overlapping codes at the same
 * time (issue 15 item 4), on both backends: every code is created once, by one of them, whose
 * report says `created` while the other's says `taken`; counted against the database and the
 * `url.created` events of the log. The built server (`npm run build`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ImportReport } from '../../src/domain/link-transfer.js';
import { BACKENDS, useTestDatabase } from '../helpers/backends.js';
import { storedLinks } from '../helpers/link-transfer.js';
import { CENSUS_ENV, createdInLog } from '../helpers/outbox-census.js';
import { type ServerProcess, startAdministeredPair } from '../helpers/server-process.js';

const ADMIN = { username: 'xpadmin', email: 'xpadmin@example.com', password: 'processes admin password' };
const code = (i: number) => `xp${String(i).padStart(6, '0')}`;
const file = (from: number, to: number) =>
  `code,url\n${Array.from({ length: to - from }, (_, k) => `${code(from + k)},https://example.com/p/${from + k}`).join('\n')}\n`;

describe.each(BACKENDS)('imports of overlapping codes in two processes at once on $name', (backend) => {
  const database = useTestDatabase(backend);
  const servers: ServerProcess[] = [];
  let headers: Record<string, string>;

  beforeAll(async () => {
    if (!backend.available) return;
    servers.push(...(await startAdministeredPair({ ...CENSUS_ENV, DATABASE_URL: database.databaseUrl }, ADMIN)));
    const login = await fetch(`${servers[0]!.url}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: ADMIN.username, password: ADMIN.password }),
    });
    expect(login.status).toBe(200);
    const cookies = login.headers.getSetCookie().map((c) => c.slice(0, c.indexOf(';')));
    const csrf = cookies.find((c) => c.startsWith('csrf_token='))!.slice('csrf_token='.length);
    // The same session on both: they share the secret key and the database.
    headers = { cookie: cookies.join('; '), 'x-csrf-token': csrf };
  }, 60_000);
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  it.skipIf(!backend.available)(
    'each code is created once; each report says created or taken accordingly',
    async () => {
      const post = async (server: ServerProcess, body: string) => {
        const response = await fetch(`${server.url}/api/v1/links/import`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'text/csv' },
          body,
        });
        expect(response.status, await response.clone().text()).toBe(200);
        return (await response.json()) as ImportReport;
      };
      // 12,000 rows each, 6,000 of them in both: six batches each, interleaving.
      const [a, b] = await Promise.all([post(servers[0]!, file(0, 12_000)), post(servers[1]!, file(6000, 18_000))]);

      const createdBy = (report: ImportReport) =>
        new Set(report.rows.filter((r) => r.status === 'created').map((r) => r.code!));
      const createdA = createdBy(a);
      const createdB = createdBy(b);
      for (const report of [a, b]) {
        expect(report.rows).toHaveLength(12_000);
        expect(report.totals.refused).toBe(0);
        for (const r of report.rows.filter((r) => r.status === 'taken')) expect(r.detail).toBe('the code is taken');
      }
      for (let i = 0; i < 18_000; i++) {
        const inA = createdA.has(code(i));
        const inB = createdB.has(code(i));
        expect(inA !== inB, code(i)).toBe(true); // created by exactly one of them
      }
      expect(createdA.size + createdB.size).toBe(18_000);

      // Against the database: every code once, with its URL; one url.created each.
      const stored = await storedLinks(database.databaseUrl, 'xp');
      expect(stored.size).toBe(18_000);
      expect(stored.get(code(7000))?.url).toBe('https://example.com/p/7000');
      const events = await createdInLog(database.databaseUrl);
      const imported = [...events.entries()].filter(([c]) => c.startsWith('xp'));
      expect(imported).toHaveLength(18_000);
      for (const [c, ids] of imported) expect(ids, c).toHaveLength(1);
    },
    120_000,
  );
});
