import { type Kysely, sql } from 'kysely';
import { errors } from '../../domain/errors.js';
import type { NewUrlMapping, UrlMapping, UrlMappingChanges } from '../../domain/url-mapping.js';
import type { EventsFor } from '../../domain/events.js';
import type { ListOptions, RedirectTarget, UrlMappingRepository } from '../../ports/url-mapping-repository.js';
import type { TransactionalOutbox } from '../event-bus/outbox.js';
import { type Dialect, isUniqueViolation } from './database.js';
import { PreparedQuery } from './prepared-query.js';
import type { DatabaseSchema } from './schema.js';

const COLUMNS = ['id', 'code', 'url', 'created_at', 'click_count'] as const;
/** Rows per UPDATE statement on PostgreSQL. */
const PG_CLICK_ROWS = 500;

type ClickDeltas = ReadonlyArray<readonly [id: number, delta: number]>;

/**
 * URL mappings in SQLite or PostgreSQL through one Kysely query set. With an outbox, the events
 * of each change are written in the change's own transaction.
 */
export class KyselyUrlMappingRepository implements UrlMappingRepository {
  /** The insert of `POST /shorten`, built once: building it cost more than running it. */
  private readonly insert: PreparedQuery<DatabaseSchema, UrlMapping, NewUrlMapping>;

  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly dialect: Dialect,
    private readonly outbox?: TransactionalOutbox,
  ) {
    this.insert = new PreparedQuery(db, (db, p) =>
      db
        .insertInto('url_mappings')
        .values({ code: p('code'), url: p('url'), created_at: p('created_at'), click_count: p('click_count') })
        .returning(COLUMNS),
    );
  }

  create(mapping: NewUrlMapping, events?: EventsFor<UrlMapping>): Promise<UrlMapping> {
    return this.write(events, async (db) => {
      try {
        const { rows } = await this.insert.run(db, mapping);
        return rows[0]!;
      } catch (error) {
        if (isUniqueViolation(error)) throw errors.codeConflict();
        throw error;
      }
    });
  }

  findByCode(code: string): Promise<UrlMapping | undefined> {
    return this.db.selectFrom('url_mappings').select(COLUMNS).where('code', '=', code).executeTakeFirst();
  }

  findTarget(code: string): Promise<RedirectTarget | undefined> {
    return this.db.selectFrom('url_mappings').select(['id', 'url']).where('code', '=', code).executeTakeFirst();
  }

  list(options: ListOptions = {}): Promise<UrlMapping[]> {
    let query = this.db.selectFrom('url_mappings').select(COLUMNS).orderBy('id');
    if (options.after !== undefined) query = query.where('id', '>', options.after);
    if (options.limit !== undefined) query = query.limit(options.limit);
    return query.execute();
  }

  update(code: string, changes: UrlMappingChanges, events?: EventsFor<UrlMapping>): Promise<UrlMapping | undefined> {
    const values = Object.fromEntries(
      Object.entries(changes).filter(([, value]) => value !== null && value !== undefined),
    );
    if (Object.keys(values).length === 0) return this.findByCode(code);
    return this.write(events, async (db) => {
      try {
        return await db
          .updateTable('url_mappings')
          .set(values)
          .where('code', '=', code)
          .returning(COLUMNS)
          .executeTakeFirst();
      } catch (error) {
        if (isUniqueViolation(error)) throw errors.codeConflict();
        throw error;
      }
    });
  }

  delete(code: string, events?: EventsFor<number>): Promise<number | undefined> {
    return this.write(events, async (db) => {
      const row = await db.deleteFrom('url_mappings').where('code', '=', code).returning('id').executeTakeFirst();
      return row?.id;
    });
  }

  async addClicks(deltas: ClickDeltas, events?: EventsFor<ClickDeltas>): Promise<void> {
    if (deltas.length === 0) return;
    await this.write(events, async (db) => {
      if (this.dialect === 'sqlite') {
        // Primary-key updates one by one: SQLite plans an UPDATE … FROM a VALUES list as a scan.
        for (const [id, delta] of deltas) {
          await db
            .updateTable('url_mappings')
            .set((eb) => ({ click_count: eb('click_count', '+', delta) }))
            .where('id', '=', id)
            .execute();
        }
      } else {
        for (let start = 0; start < deltas.length; start += PG_CLICK_ROWS) {
          const rows = deltas
            .slice(start, start + PG_CLICK_ROWS)
            .map(([id, delta]) => sql`(CAST(${id} AS BIGINT), CAST(${delta} AS BIGINT))`);
          await sql`
            WITH deltas(id, delta) AS (VALUES ${sql.join(rows)})
            UPDATE url_mappings SET click_count = url_mappings.click_count + deltas.delta
            FROM deltas WHERE url_mappings.id = deltas.id`.execute(db);
        }
      }
      return deltas;
    });
  }

  private write<T>(
    events: EventsFor<NonNullable<T>> | undefined,
    change: (db: Kysely<DatabaseSchema>) => Promise<T>,
  ): Promise<T> {
    return this.outbox ? this.outbox.transact(this.db, events, change) : change(this.db);
  }
}
