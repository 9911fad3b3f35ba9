/**
 * An import whose database fails part-way (issue 15 item 4): what the report says was created is
 * stored, each with its one `url.created`; no other row of the file is. SQLite: the disk is full
 * after the second batch (the service's connection may grow the file no more: SQLITE_FULL);
 * PostgreSQL: the connection is cut by a TCP proxy after the second batch.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { ImportReport, RowOutcome } from '../../src/domain/link-transfer.js';
import { type TestApp, useTestApps } from '../helpers/app.js';
import { type Backend, postgres, sqlite } from '../helpers/backends.js';
import { storedLinks } from '../helpers/link-transfer.js';
import { createdInLog } from '../helpers/outbox-census.js';
import { POSTGRES_URL } from '../helpers/services.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';

const ROWS = 10_000;
const PREFIX = 'xf';
/** Batches of 2,000 (the service's default): the database fails after 4,000 rows. */
const FAIL_AFTER = 4000;

const file = Array.from({ length: ROWS }, (_, i) => ({
  code: `${PREFIX}${String(i).padStart(6, '0')}`,
  url: `https://example.com/f/${i}`,
}));

/** A database that can be made to fail while an import runs, and made well again. */
interface Breakable {
  readonly databaseUrl: string;
  /** The URL the service uses (through the proxy on PostgreSQL). */
  readonly serviceUrl: string;
  fail(app: TestApp): void;
  heal(app: TestApp): Promise<void>;
  drop(): Promise<void>;
}

async function breakable(backend: Backend): Promise<Breakable> {
  const database = await backend.create();
  if (backend.name === 'sqlite') {
    // Queued on the service's one write connection before the import's next batch.
    const pragma = (app: TestApp, statement: string) => sql.raw(statement).execute(app.service.database.db);
    return {
      databaseUrl: database.databaseUrl,
      serviceUrl: database.databaseUrl,
      fail(app) {
        void pragma(app, 'PRAGMA max_page_count = 1'); // no larger than it is: full
      },
      async heal(app) {
        await pragma(app, 'PRAGMA max_page_count = 1073741823');
      },
      drop: () => database.drop(),
    };
  }
  const target = new URL(POSTGRES_URL);
  const proxy = await TcpProxy.start(target.hostname, Number(target.port || 5432));
  const url = new URL(database.databaseUrl);
  url.host = `127.0.0.1:${proxy.port}`;
  return {
    databaseUrl: database.databaseUrl,
    serviceUrl: url.toString(),
    fail: () => void proxy.refuse(),
    heal: () => proxy.pass(),
    async drop() {
      await proxy.close();
      await database.drop();
    },
  };
}

describe.each([sqlite, postgres])('an import whose database fails part-way on $name', (backend) => {
  const start = useTestApps('each');

  it.skipIf(!backend.available)(
    'stores exactly the rows reported created, each with one url.created',
    async () => {
      const db = await breakable(backend);
      try {
        const app = await start(
          backend,
          { DB_CONNECT_TIMEOUT_MS: '500' },
          { database: { databaseUrl: db.serviceUrl, drop: async () => undefined } },
        );
        let failed = false;
        const outcomes: RowOutcome[] = [];
        const report: ImportReport = await app.service.linkTransfer.importLinks(file, {
          owner: null,
          onRow: (outcome) => outcomes.push(outcome),
          onProgress: (rows) => {
            if (rows >= FAIL_AFTER && !failed) {
              failed = true;
              db.fail(app);
            }
          },
        });
        await db.heal(app);
        await app.close();

        expect(report.detail).toMatch(/^The database failed at row 4001 .*Import the file again/);
        expect(outcomes).toHaveLength(ROWS);
        const created = outcomes.filter((o) => o.status === 'created').map((o) => o.code!);
        expect(created).toHaveLength(FAIL_AFTER);
        expect(report.totals).toEqual({ rows: ROWS, created: FAIL_AFTER, taken: 0, refused: ROWS - FAIL_AFTER });
        for (const o of outcomes.filter((o) => o.status !== 'created')) {
          expect(o).toMatchObject({ status: 'refused', detail: 'not imported: the database failed at row 4001' });
        }

        // The checker: reported created against stored, and against the events in the log.
        const stored = await storedLinks(db.databaseUrl, PREFIX);
        expect([...stored.keys()].sort()).toEqual([...created].sort());
        const events = await createdInLog(db.databaseUrl);
        const imported = [...events.entries()].filter(([code]) => code.startsWith(PREFIX));
        expect(imported.length).toBe(created.length);
        for (const [code, ids] of imported) expect(ids, code).toHaveLength(1);
      } finally {
        await db.drop();
      }
    },
    60_000,
  );
});
