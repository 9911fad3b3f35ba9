import { type Kysely, sql } from 'kysely';
import type { EventsFor } from '../../domain/events.js';
import type { ImportedLink } from '../../domain/link-transfer.js';
import { storedInstant, type UrlMapping } from '../../domain/url-mapping.js';
import type { LinkImportStore } from '../../ports/link-import-store.js';
import type { EncodedMessage, TransactionalOutbox } from '../event-bus/outbox.js';
import type { Dialect } from './database.js';
import type { DatabaseSchema } from './schema.js';

/**
 * Imported links in SQLite or PostgreSQL: each call is one multi-row `INSERT … ON CONFLICT (code)
 * DO NOTHING RETURNING` in one transaction, with the `url.created` events of the rows it wrote
 * appended in that same transaction (through the outbox, as a single create's are), so an
 * imported link always has its event and a failed call leaves neither.
 *
 * The statement is the same whatever the number of rows (a JSON text on SQLite, arrays on
 * PostgreSQL), in code order on PostgreSQL, so that two imports of overlapping codes take their
 * rows' locks in the same order and never wait on each other in a cycle.
 */
export class KyselyLinkImportStore implements LinkImportStore {
  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly dialect: Dialect,
    private readonly outbox?: TransactionalOutbox,
  ) {}

  async insertMany(
    links: readonly ImportedLink[],
    events?: EventsFor<UrlMapping>,
  ): Promise<(UrlMapping | undefined)[]> {
    if (links.length === 0) return [];
    const outbox = this.outbox;
    if (outbox && events) {
      return outbox.transactAll(this.db, async (trx, record) => {
        const rows = await this.insert(trx, links);
        const messages: EncodedMessage[] = [];
        for (const row of rows) if (row) messages.push(...outbox.messages(events(row)));
        record(messages);
        return rows;
      });
    }
    return this.db.transaction().execute((trx) => this.insert(trx, links));
  }

  async takenCodes(codes: readonly string[]): Promise<Set<string>> {
    if (codes.length === 0) return new Set();
    const { rows } =
      this.dialect === 'postgres'
        ? await sql<{ code: string }>`
            SELECT code FROM url_mappings WHERE code = ANY(CAST(${codes} AS TEXT[]))`.execute(this.db)
        : await sql<{ code: string }>`
            SELECT code FROM url_mappings
            WHERE code IN (SELECT value FROM json_each(${JSON.stringify(codes)}))`.execute(this.db);
    return new Set(rows.map((row) => row.code));
  }

  /** Each link's row as written (built from the link and its new id), undefined when its code was taken. */
  private async insert(
    trx: Kysely<DatabaseSchema>,
    links: readonly ImportedLink[],
  ): Promise<(UrlMapping | undefined)[]> {
    const written = await (this.dialect === 'postgres'
      ? this.insertPostgres(trx, links)
      : this.insertSqlite(trx, links));
    const ids = new Map(written.map((row) => [row.code, Number(row.id)]));
    return links.map((link) => {
      const id = ids.get(link.code);
      if (id === undefined) return undefined;
      // A later link of the same code in this call was not written: the first one was.
      ids.delete(link.code);
      const { expiresAt, maxVisits, ...fields } = link;
      return {
        id,
        ...fields,
        owner: link.owner ?? null,
        expires_at: expiresAt ? storedInstant(expiresAt) : null,
        max_visits: maxVisits ?? null,
      };
    });
  }

  private async insertSqlite(trx: Kysely<DatabaseSchema>, links: readonly ImportedLink[]) {
    const values = links.map((l) => [
      l.code,
      l.url,
      l.created_at,
      l.click_count,
      l.owner ?? null,
      l.expiresAt ? storedInstant(l.expiresAt) : null,
      l.maxVisits ?? null,
    ]);
    // `WHERE true`: without it SQLite would read ON CONFLICT as a join constraint.
    const { rows } = await sql<{ id: number; code: string }>`
      INSERT INTO url_mappings (code, url, created_at, click_count, owner_id, expires_at, max_visits)
      SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6
      FROM json_each(${JSON.stringify(values)}) WHERE true
      ON CONFLICT (code) DO NOTHING
      RETURNING id, code`.execute(trx);
    return rows;
  }

  private async insertPostgres(trx: Kysely<DatabaseSchema>, links: readonly ImportedLink[]) {
    const column = <K extends keyof ImportedLink>(key: K) => links.map((l) => l[key] ?? null);
    const expiresAt = links.map((l) => (l.expiresAt ? storedInstant(l.expiresAt) : null));
    const { rows } = await sql<{ id: number; code: string }>`
      INSERT INTO url_mappings (code, url, created_at, click_count, owner_id, expires_at, max_visits)
      SELECT * FROM unnest(CAST(${column('code')} AS TEXT[]), CAST(${column('url')} AS TEXT[]),
        CAST(${column('created_at')} AS TIMESTAMPTZ[]), CAST(${column('click_count')} AS BIGINT[]),
        CAST(${column('owner')} AS BIGINT[]), CAST(${expiresAt} AS TIMESTAMPTZ[]),
        CAST(${column('maxVisits')} AS BIGINT[])) AS t(code, url, created_at, click_count, owner_id, expires_at, max_visits)
      ORDER BY code
      ON CONFLICT (code) DO NOTHING
      RETURNING id, code`.execute(trx);
    return rows;
  }
}
