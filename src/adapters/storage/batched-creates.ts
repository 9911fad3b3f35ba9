import { type Context, context } from '@opentelemetry/api';
import { type Kysely, sql } from 'kysely';
import { errors } from '../../domain/errors.js';
import type { EventsFor } from '../../domain/events.js';
import { type NewUrlMapping, storedInstant, type UrlMapping } from '../../domain/url-mapping.js';
import type { EncodedMessage, TransactionalOutbox } from '../event-bus/outbox.js';
import { isDatabaseAway } from './connection-errors.js';
import type { Dialect } from './database.js';
import { PreparedQuery } from './prepared-query.js';
import type { DatabaseSchema } from './schema.js';

/**
 * The columns a batch inserts, each with its PostgreSQL type and its value in a create: a new
 * column of `url_mappings` that creates set is one more entry here (and in RETURNING_COLUMNS).
 */
const INSERTED: readonly { column: string; pgType: string; value: (m: NewUrlMapping) => unknown }[] = [
  { column: 'code', pgType: 'TEXT', value: (m) => m.code },
  { column: 'url', pgType: 'TEXT', value: (m) => m.url },
  { column: 'created_at', pgType: 'TIMESTAMPTZ', value: (m) => m.created_at },
  { column: 'click_count', pgType: 'BIGINT', value: (m) => m.click_count },
  { column: 'owner_id', pgType: 'BIGINT', value: (m) => m.owner ?? null },
  { column: 'expires_at', pgType: 'TIMESTAMPTZ', value: (m) => (m.expiresAt ? storedInstant(m.expiresAt) : null) },
  { column: 'max_visits', pgType: 'BIGINT', value: (m) => m.maxVisits ?? null },
];
/** What PostgreSQL answers for each inserted row: the mapping as read (its timestamps as stored). */
const RETURNING_COLUMNS = 'id, code, url, created_at, click_count, owner_id AS owner, expires_at, max_visits';
const COLUMN_LIST = sql.raw(INSERTED.map((c) => c.column).join(', '));
/** SQLite: one JSON parameter, an array of rows, each an array of the columns' values. */
const SQLITE_VALUES = sql.raw(INSERTED.map((_, i) => `value ->> ${i}`).join(', '));

/**
 * The batch's multi-row insert, built and compiled once (a prepared statement, its text the same
 * whatever the batch's size): PostgreSQL takes one array parameter per column, unnested into
 * rows; SQLite one JSON parameter, an array of rows, each an array of the columns' values.
 */
function insertAll(db: Kysely<DatabaseSchema>, dialect: Dialect) {
  const statement = new PreparedQuery<DatabaseSchema, UrlMapping>(db, (db, p) => ({
    compile: () =>
      (dialect === 'postgres'
        ? sql<UrlMapping>`
            INSERT INTO url_mappings (${COLUMN_LIST})
            SELECT * FROM unnest(${sql.join(INSERTED.map((c) => sql`CAST(${p(c.column)} AS ${sql.raw(c.pgType)}[])`))})
            ON CONFLICT (code) DO NOTHING RETURNING ${sql.raw(RETURNING_COLUMNS)}`
        : // The row is what was written, with the id it got: only those two are read back. `WHERE
          // true`: without it SQLite would read ON CONFLICT as a join constraint.
          sql<UrlMapping>`
            INSERT INTO url_mappings (${COLUMN_LIST}) SELECT ${SQLITE_VALUES} FROM json_each(${p('rows')}) WHERE true
            ON CONFLICT (code) DO NOTHING RETURNING id, code`
      ).compile(db),
  }));
  const params: (batch: readonly NewUrlMapping[]) => Record<string, unknown> =
    dialect === 'postgres'
      ? (batch) => Object.fromEntries(INSERTED.map((c) => [c.column, batch.map((m) => c.value(m) ?? null)]))
      : (batch) => ({ rows: JSON.stringify(batch.map((m) => INSERTED.map((c) => c.value(m) ?? null))) });
  return (trx: Kysely<DatabaseSchema>, batch: readonly NewUrlMapping[]) => statement.run(trx, params(batch));
}

interface PendingCreate {
  readonly mapping: NewUrlMapping;
  readonly events: EventsFor<UrlMapping> | undefined;
  /** The caller's trace context: its event's trace headers are made in it. */
  readonly context: Context;
  readonly resolve: (row: UrlMapping) => void;
  readonly reject: (error: unknown) => void;
}

/** Creates one mapping with its events in a transaction of its own (the repository's single path). */
export type CreateOne = (mapping: NewUrlMapping, events: EventsFor<UrlMapping> | undefined) => Promise<UrlMapping>;

/**
 * The creates that arrive during one turn of the event loop, or while the previous
 * batch commits, share one transaction: one multi-row `INSERT … ON CONFLICT (code) DO NOTHING
 * RETURNING`, their events appended together (each partition's offsets in one statement), one
 * commit. Concurrent creates otherwise queue one by one on the log partitions' counters, each
 * holding its partition until its commit. Every caller still gets its own outcome: its row once
 * the batch has committed, or CODE_CONFLICT when the code was taken (before, or by an earlier
 * create of the same batch). A batch that fails as a whole runs again one create at a time, so
 * that an error reaches only the create it belongs to, unless the database is away: then every
 * create of the batch fails with that error at once.
 */
export class BatchedCreates {
  private queue: PendingCreate[] = [];
  /** Batches in flight (one by default: a batch holds the log partitions it appends to until its commit, so a second would mostly wait, and split the requests into smaller batches). */
  private inFlight = 0;
  private scheduled = false;
  private readonly insertAll: ReturnType<typeof insertAll>;

  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly dialect: Dialect,
    private readonly outbox: TransactionalOutbox | undefined,
    private readonly createOne: CreateOne,
    /** Most creates one transaction takes; the rest wait for the next. */
    private readonly maxBatch = 256,
    private readonly maxInFlight = 1,
  ) {
    this.insertAll = insertAll(db, dialect);
  }

  create(mapping: NewUrlMapping, events: EventsFor<UrlMapping> | undefined): Promise<UrlMapping> {
    return new Promise<UrlMapping>((resolve, reject) => {
      this.queue.push({ mapping, events, context: context.active(), resolve, reject });
      this.schedule();
    });
  }

  /** A batch starts after this turn's other requests have queued theirs, when fewer than `maxInFlight` run. */
  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight || this.queue.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (this.inFlight >= this.maxInFlight || this.queue.length === 0) return;
      this.inFlight++;
      void this.run(this.queue.splice(0, this.maxBatch)).finally(() => {
        this.inFlight--;
        this.schedule();
      });
      this.schedule();
    });
  }

  private async run(batch: readonly PendingCreate[]): Promise<void> {
    if (batch.length > 1) return this.commitBatch(batch);
    const [only] = batch as [PendingCreate];
    await this.createAlone(only);
  }

  private createAlone(p: PendingCreate): Promise<void> {
    return context.with(p.context, () => this.createOne(p.mapping, p.events)).then(p.resolve, p.reject);
  }

  private async commitBatch(batch: readonly PendingCreate[]): Promise<void> {
    let outcomes: (UrlMapping | undefined)[];
    try {
      outcomes = this.outbox
        ? await this.outbox.transactAll(this.db, (trx, record) => this.insert(trx, batch, record))
        : await this.db.transaction().execute((trx) => this.insert(trx, batch, () => undefined));
    } catch (error) {
      // The database away: every create of the batch answers so at once (503), none retried
      // (the transaction did not commit, so none of them was written).
      if (isDatabaseAway(error)) {
        for (const p of batch) p.reject(error);
        return;
      }
      // Each on its own: the one whose error it was sees it, the others commit.
      for (const p of batch) await this.createAlone(p);
      return;
    }
    batch.forEach((p, i) => {
      const row = outcomes[i];
      if (row) p.resolve(row);
      else p.reject(errors.codeConflict());
    });
  }

  /**
   * PostgreSQL: the batch's rows in code order (stable: of one code, the first to arrive still
   * comes first), so that each code's index entry is taken in one order by every instance. In the
   * order they came, two instances' batches taking the same codes in opposite orders each waited
   * for a code the other held: a deadlock, ended after `deadlock_timeout` (1 s), and the batch run
   * again create by create. SQLite has one writer: no two batches are ever open together.
   */
  private inLockOrder(mappings: NewUrlMapping[]): NewUrlMapping[] {
    if (this.dialect !== 'postgres') return mappings;
    return mappings.sort((x, y) => (x.code < y.code ? -1 : x.code > y.code ? 1 : 0));
  }

  /** Inserts the batch; each create's row (undefined: its code was taken), its events recorded. */
  private async insert(
    trx: Kysely<DatabaseSchema>,
    batch: readonly PendingCreate[],
    record: (messages: readonly EncodedMessage[]) => void,
  ): Promise<(UrlMapping | undefined)[]> {
    const { rows } = await this.insertAll(trx, this.inLockOrder(batch.map((p) => p.mapping)));
    const byCode = new Map(rows.map((row) => [row.code, row]));
    return batch.map((p) => {
      const returned = byCode.get(p.mapping.code);
      const row = returned && this.dialect === 'sqlite' ? asWritten(p.mapping, returned.id) : returned;
      // The first create of a code in the batch got the row; a later one of the same code did not.
      byCode.delete(p.mapping.code);
      if (row && p.events && this.outbox) {
        const outbox = this.outbox;
        const events = p.events;
        record(context.with(p.context, () => outbox.messages(events(row))));
      }
      return row;
    });
  }
}

/** SQLite: the mapping as written, with the id it got (RETURNING every column costs as much as the insert). */
function asWritten(mapping: NewUrlMapping, id: number): UrlMapping {
  const { code, url, created_at, click_count } = mapping;
  const expires_at = mapping.expiresAt ? storedInstant(mapping.expiresAt) : null;
  return {
    id,
    code,
    url,
    created_at,
    click_count,
    owner: mapping.owner ?? null,
    expires_at,
    max_visits: mapping.maxVisits ?? null,
  };
}
