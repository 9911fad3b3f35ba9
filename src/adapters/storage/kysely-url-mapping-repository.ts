import { trace } from '@opentelemetry/api';
import type SQLite from 'better-sqlite3';
import { type Compilable, type Expression, type Kysely, sql, type SqlBool } from 'kysely';
import { errors } from '../../domain/errors.js';
import {
  type ExpiryReason,
  expiryReason,
  type NewUrlMapping,
  storedInstant,
  type UrlMapping,
  type UrlMappingChanges,
} from '../../domain/url-mapping.js';
import type { EventsFor } from '../../domain/events.js';
import type {
  ClickChunk,
  ClickCompaction,
  CompactOptions,
  ExpiredEventFor,
  ListOptions,
  OwnerGuard,
  RedirectTarget,
  UrlMappingRepository,
  VisitReservation,
} from '../../ports/url-mapping-repository.js';
import type { TransactionalOutbox } from '../event-bus/outbox.js';
import { type Dialect, isUniqueViolation } from './database.js';
import { PreparedQuery } from './prepared-query.js';
import { indexSearch, listMappings, READ_COLUMNS, withLimitsIfSet } from './url-mapping-list.js';
import type { DatabaseSchema } from './schema.js';
import { BatchedTargetLookup, type CodedTarget, SqliteTargetLookup, TARGET_COLUMNS } from './target-lookup.js';
import { BatchedCreates } from './batched-creates.js';

const COLUMNS = [
  'id',
  'code',
  'url',
  'created_at',
  'click_count',
  'owner_id as owner',
  'expires_at',
  'max_visits',
] as const;

/** A new mapping as its insert binds it: the owner and limits null when there are none. */
type InsertParams = NewUrlMapping & { owner: number | null; expires: string | null; max: number | null };
/**
 * PostgreSQL advisory lock (any constant of our own) between compaction, which holds it alone,
 * and the updates and deletes of mappings, which share it: a compaction that folds a mapping's
 * deltas must not interleave with a change that replaces or drops them (or reads them back).
 */
const PG_COUNTS_LOCK = 0x75726c636c6b; // "urlclk"

type ClickDeltas = ReadonlyArray<readonly [id: number, delta: number]>;

/**
 * URL mappings in SQLite or PostgreSQL through one Kysely query set. With an outbox, the events
 * of each change are written in the change's own transaction.
 *
 * Clicks are added to the narrow `url_click_deltas` table (a row of two integers per mapping
 * clicked since the last compaction), so that a flush writes a few pages of it however many
 * mappings there are, rather than a row on a page of its own of the wide `url_mappings` for every
 * mapping clicked; `compactClicks` folds them into `click_count` now and then, a range of ids at a
 * time.
 */
export class KyselyUrlMappingRepository implements UrlMappingRepository {
  /** The insert of `POST /shorten`, built once: building it cost more than running it. */
  private readonly insert: PreparedQuery<DatabaseSchema, UrlMapping, InsertParams>;
  /** The redirect path's lookup when no recording span wants its statement (see `findTarget`). */
  private readonly targets: SqliteTargetLookup | BatchedTargetLookup | undefined;
  /**
   * Concurrent creates share a transaction and one insert (on SQLite that transaction is in turn
   * one unit of the group commit of the service's writes).
   */
  private readonly creates: BatchedCreates;

  /**
   * @param reader SQLite: the connection to read committed rows from at once (`Database.reader`),
   *   for the redirect path's lookups
   */
  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly dialect: Dialect,
    private readonly outbox?: TransactionalOutbox,
    reader?: () => SQLite.Database,
  ) {
    this.targets =
      dialect === 'postgres'
        ? new BatchedTargetLookup((codes) => this.findTargets(codes))
        : reader && new SqliteTargetLookup(reader);
    this.insert = new PreparedQuery(db, (db, p) => {
      const insert = db.insertInto('url_mappings').values({
        code: p('code'),
        url: p('url'),
        created_at: p('created_at'),
        click_count: p('click_count'),
        owner_id: p('owner'),
        expires_at: p('expires'),
        max_visits: p('max'),
      });
      // SQLite answers no row, only the id it gave (see `create`).
      return dialect === 'sqlite' ? (insert as unknown as Compilable<UrlMapping>) : insert.returning(COLUMNS);
    });
    this.creates = new BatchedCreates(db, dialect, outbox, (mapping, events) => this.createOne(mapping, events));
  }

  async create(mapping: NewUrlMapping, events?: EventsFor<UrlMapping>): Promise<UrlMapping> {
    return withLimitsIfSet(await this.creates.create(mapping, events));
  }

  private createOne(mapping: NewUrlMapping, events?: EventsFor<UrlMapping>): Promise<UrlMapping> {
    return this.write(events, async (db) => {
      try {
        // A new id has no deltas: ids are never reused (AUTOINCREMENT, identity).
        const owner = mapping.owner ?? null;
        const expires = mapping.expiresAt ? storedInstant(mapping.expiresAt) : null;
        const max = mapping.maxVisits ?? null;
        const result = await this.insert.run(db, { ...mapping, owner, expires, max });
        // SQLite: the row is what was written, with the id it got (RETURNING costs as much as the insert).
        if (this.dialect === 'sqlite') {
          const { code, url, created_at, click_count } = mapping;
          const id = Number(result.insertId);
          return { id, code, url, created_at, click_count, owner, expires_at: expires, max_visits: max };
        }
        return result.rows[0]!;
      } catch (error) {
        if (isUniqueViolation(error)) throw errors.codeConflict();
        throw error;
      }
    });
  }

  async findByCode(code: string): Promise<UrlMapping | undefined> {
    const row = await this.db
      .selectFrom('url_mappings')
      .select(READ_COLUMNS)
      .where('code', '=', code)
      .executeTakeFirst();
    return row && withLimitsIfSet(row);
  }

  /**
   * At once on SQLite (its read-only connection), batched with the other lookups of this turn on
   * PostgreSQL. When the request's span is recording, the lookup gets a statement span of its
   * own: on SQLite around the same read, on PostgreSQL by a statement of its own through Kysely.
   */
  findTarget(code: string): RedirectTarget | undefined | Promise<RedirectTarget | undefined> {
    const targets = this.targets;
    const traced = trace.getActiveSpan()?.isRecording() === true;
    if (targets instanceof SqliteTargetLookup) return traced ? targets.findTraced(code) : targets.find(code);
    if (targets !== undefined && !traced) return targets.find(code);
    return this.db
      .selectFrom('url_mappings')
      .select(['id', 'url', 'expires_at', 'max_visits', 'visits_used'])
      .where('code', '=', code)
      .executeTakeFirst();
  }

  /** The mappings of `codes` that exist, in one statement (the redirect path's batches). */
  async findTargets(codes: readonly string[]): Promise<readonly CodedTarget[]> {
    const { rows } =
      this.dialect === 'postgres'
        ? await sql<CodedTarget>`
            SELECT code, ${sql.raw(TARGET_COLUMNS)} FROM url_mappings WHERE code = ANY(CAST(${codes} AS TEXT[]))`.execute(
            this.db,
          )
        : await sql<CodedTarget>`
            SELECT code, ${sql.raw(TARGET_COLUMNS)} FROM url_mappings
            WHERE code IN (SELECT value FROM json_each(${JSON.stringify(codes)}))`.execute(this.db);
    return rows;
  }

  list(options: ListOptions = {}): Promise<UrlMapping[]> {
    return listMappings(this.db, this.dialect, options);
  }

  /**
   * Adds up to `limit` new mappings to SQLite's search index (off the request path: indexing
   * costs several inserts' worth); searches read the ones not yet there directly. How many ids
   * it covered, 0 when caught up (always on PostgreSQL, whose indexes follow every insert).
   */
  indexSearch(limit: number): Promise<number> {
    return indexSearch(this.db, this.dialect, limit);
  }

  update(
    code: string,
    changes: UrlMappingChanges,
    events?: EventsFor<UrlMapping>,
    guard?: OwnerGuard,
    expired?: ExpiredEventFor,
  ): Promise<UrlMapping | undefined> {
    const values = columnChanges(changes);
    if (Object.keys(values).length === 0) {
      return this.findByCode(code).then((row) => (row && guardHolds(row, guard) ? row : undefined));
    }
    const owned = ownedBy(guard);
    const limitsChanged = changes.expiresAt !== undefined || changes.maxVisits !== undefined;
    let stopped: { row: UrlMapping; reason: ExpiryReason } | undefined;
    const withExpired: EventsFor<UrlMapping> | undefined =
      events && ((row) => [...events(row), ...(stopped && expired ? [expired(stopped.row, stopped.reason)] : [])]);
    return this.write(
      withExpired,
      async (db) => {
        await this.shareCountsLock(db);
        try {
          if (values.click_count !== undefined) {
            // The count set replaces the pending clicks too (first, so the write lock is taken at once).
            await db
              .deleteFrom('url_click_deltas')
              .where('url_id', 'in', db.selectFrom('url_mappings').select('id').where('code', '=', code).where(owned))
              .execute();
          }
          const updated = await db
            .updateTable('url_mappings')
            .set(values)
            .where('code', '=', code)
            .where(owned)
            .returning([...READ_COLUMNS, 'visits_used', 'expired_event_at'])
            .executeTakeFirst();
          if (updated === undefined) return undefined;
          const { visits_used, expired_event_at, ...stored } = updated;
          const row = withLimitsIfSet(stored);
          const reason = limitsChanged ? await this.settleExpiry(db, row, visits_used, expired_event_at) : undefined;
          if (reason !== undefined) stopped = { row, reason };
          return row;
        } catch (error) {
          if (isUniqueViolation(error)) throw errors.codeConflict();
          throw error;
        }
      },
      true,
    );
  }

  /**
   * After a change of `row`'s limits, in its transaction: when the change stopped the link, claims
   * its `url.expired` (and answers why), unless its stop was already published; when the link
   * answers again, clears the claim so that its next stop is published.
   */
  private async settleExpiry(
    db: Kysely<DatabaseSchema>,
    row: UrlMapping,
    visitsUsed: number,
    expiredEventAt: string | null,
  ): Promise<ExpiryReason | undefined> {
    const reason = expiryReason({ ...row, visits_used: visitsUsed }, Date.now());
    const claim = reason !== undefined && expiredEventAt === null;
    if (claim || (reason === undefined && expiredEventAt !== null)) {
      const at = claim ? storedInstant(new Date()) : null;
      await db.updateTable('url_mappings').set({ expired_event_at: at }).where('id', '=', row.id).execute();
    }
    return claim ? reason : undefined;
  }

  /**
   * One statement, whose WHERE is the reservation: the row lock (PostgreSQL) or the single writer
   * (SQLite) makes concurrent ones, from any instance, take visits one after the other. Only the
   * one that takes the last visit sets `expired_event_at` and records `url.expired`.
   */
  async reserveVisit(id: number, expired?: ExpiredEventFor): Promise<VisitReservation> {
    const now = storedInstant(new Date());
    const notPast =
      this.dialect === 'postgres'
        ? sql`(expires_at IS NULL OR expires_at > now())`
        : sql`(expires_at IS NULL OR julianday(expires_at) > julianday(${now}))`;
    let last: UrlMapping | undefined;
    const reserved = await this.write(
      expired && (() => (last && this.outbox ? [expired(last, 'max_visits')] : [])),
      async (db) => {
        const row = await db
          .updateTable('url_mappings')
          .set({
            visits_used: sql`visits_used + 1`,
            expired_event_at: sql`CASE WHEN visits_used + 1 >= max_visits THEN ${now} ELSE expired_event_at END`,
          })
          .where('id', '=', id)
          .where('max_visits', 'is not', null)
          .where(sql<SqlBool>`visits_used < max_visits AND ${notPast}`)
          .returning([...READ_COLUMNS, 'visits_used'])
          .executeTakeFirst();
        if (row === undefined) return { granted: false, remaining: 0 };
        const { visits_used, ...mapping } = row;
        const remaining = Math.max((mapping.max_visits ?? 0) - visits_used, 0);
        if (remaining === 0) last = mapping;
        return { granted: true, remaining };
      },
    );
    return reserved;
  }

  async expireDue(limit: number, expired?: ExpiredEventFor): Promise<number> {
    const now = new Date();
    const stamp = storedInstant(now);
    // SQLite compares its canonical text: up to the second it orders as time does (a link that
    // expires within the current second waits for the next sweep); PostgreSQL compares instants.
    const due =
      this.dialect === 'postgres'
        ? sql<SqlBool>`expires_at <= ${stamp}`
        : sql<SqlBool>`expires_at < ${stamp.slice(0, 19)}`;
    const claimed = await this.write(
      expired && ((rows: UrlMapping[]) => (this.outbox ? rows.map((row) => expired(row, 'expired_at')) : [])),
      async (db) => {
        let candidates = db
          .selectFrom('url_mappings')
          .select('id')
          .where('expired_event_at', 'is', null)
          .where(due)
          .orderBy('expires_at')
          .limit(limit);
        // Another instance's sweep holds its rows: take the next ones rather than wait for them.
        if (this.dialect === 'postgres') candidates = candidates.forUpdate().skipLocked();
        return db
          .updateTable('url_mappings')
          .set({ expired_event_at: stamp })
          .where('id', 'in', candidates)
          .where('expired_event_at', 'is', null)
          .returning(READ_COLUMNS)
          .execute();
      },
      true,
    );
    return claimed.length;
  }

  delete(code: string, events?: EventsFor<number>, guard?: OwnerGuard): Promise<number | undefined> {
    return this.write(
      events,
      async (db) => {
        await this.shareCountsLock(db);
        const row = await db
          .deleteFrom('url_mappings')
          .where('code', '=', code)
          .where(ownedBy(guard))
          .returning('id')
          .executeTakeFirst();
        if (row) await db.deleteFrom('url_click_deltas').where('url_id', '=', row.id).execute();
        return row?.id;
      },
      true,
    );
  }

  /**
   * One upsert of all the deltas, its SQL the same whatever their number (a JSON text or two
   * arrays as its parameters). Unknown ids are not looked up: no read shows their deltas (reads
   * start from `url_mappings`, and ids are never reused), and compaction drops them. A `chunk`
   * first moves its writer's `last_seq` forward in the same transaction; when it cannot (the chunk
   * is in already), nothing is added.
   */
  async addClicks(deltas: ClickDeltas, events?: EventsFor<ClickDeltas>, chunk?: ClickChunk): Promise<boolean> {
    if (deltas.length === 0) return true;
    const written = await this.write(
      events,
      async (db) => {
        if (chunk && !(await this.advanceClickWriter(db, chunk))) return undefined;
        if (this.dialect === 'sqlite') {
          // `WHERE true`: without it SQLite would read ON CONFLICT as a join constraint.
          await sql`
            INSERT INTO url_click_deltas (url_id, delta)
            SELECT value ->> 0, value ->> 1 FROM json_each(${JSON.stringify(deltas)}) WHERE true
            ON CONFLICT (url_id) DO UPDATE SET delta = delta + excluded.delta`.execute(db);
        } else {
          // Summed per id (one statement may not update a row twice), in id order (rows are
          // locked in the same order by every instance).
          const ids = deltas.map(([id]) => id);
          const counts = deltas.map(([, n]) => n);
          await sql`
            INSERT INTO url_click_deltas (url_id, delta)
            SELECT id, SUM(n) FROM unnest(CAST(${ids} AS BIGINT[]), CAST(${counts} AS BIGINT[])) AS t(id, n)
            GROUP BY id ORDER BY id
            ON CONFLICT (url_id) DO UPDATE SET delta = url_click_deltas.delta + EXCLUDED.delta`.execute(db);
        }
        return deltas;
      },
      chunk !== undefined,
    );
    return written !== undefined;
  }

  async forgetClickWriters(before: number): Promise<number> {
    const result = await this.db.deleteFrom('click_writers').where('written_at', '<', before).executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** Records `chunk` as its writer's last; false when that writer has written it (or a later one) already. */
  private async advanceClickWriter(db: Kysely<DatabaseSchema>, chunk: ClickChunk): Promise<boolean> {
    const row = await db
      .insertInto('click_writers')
      .values({ writer: chunk.writer, last_seq: chunk.seq, written_at: chunk.at })
      .onConflict((oc) =>
        oc
          .column('writer')
          .doUpdateSet({ last_seq: chunk.seq, written_at: chunk.at })
          .where('click_writers.last_seq', '<', chunk.seq),
      )
      .returning('writer')
      .executeTakeFirst();
    return row !== undefined;
  }

  async compactClicks(options: CompactOptions): Promise<ClickCompaction> {
    const after = options.after ?? Number.MIN_SAFE_INTEGER;
    // The limit-th mapping with deltas past `after` (read outside the transaction: only a bound).
    const last = await this.db
      .selectFrom('url_click_deltas')
      .select('url_id')
      .where('url_id', '>', after)
      .orderBy('url_id')
      .limit(1)
      .offset(Math.max(options.limit, 1) - 1)
      .executeTakeFirst();
    const upTo = last?.url_id;
    const range = upTo === undefined ? sql`url_id > ${after}` : sql`url_id > ${after} AND url_id <= ${upTo}`;
    const folded = await this.db.transaction().execute(async (trx) => {
      if (this.dialect === 'sqlite') {
        // One writer at a time: no delta can arrive or go between these two statements.
        await sql`
          UPDATE url_mappings
          SET click_count = click_count + (SELECT d.delta FROM url_click_deltas AS d WHERE d.url_id = url_mappings.id)
          WHERE id IN (SELECT url_id FROM url_click_deltas WHERE ${range})`.execute(trx);
        const deleted = await sql`DELETE FROM url_click_deltas WHERE ${range}`.execute(trx);
        return Number(deleted.numAffectedRows ?? 0);
      }
      await sql`SELECT pg_advisory_xact_lock(${PG_COUNTS_LOCK})`.execute(trx);
      // One statement, so what is folded is exactly what is deleted, whatever flushes commit
      // meanwhile; rows locked in id order, as flushes lock them, so that neither waits in a cycle.
      const { rows } = await sql<{ folded: number }>`
        WITH claimed AS (
            DELETE FROM url_click_deltas
            WHERE url_id IN (SELECT url_id FROM url_click_deltas WHERE ${range} ORDER BY url_id FOR UPDATE)
            RETURNING url_id, delta),
          folded AS (
            UPDATE url_mappings SET click_count = url_mappings.click_count + claimed.delta
            FROM claimed WHERE url_mappings.id = claimed.url_id)
        SELECT COUNT(*) AS folded FROM claimed`.execute(trx);
      return Number(rows[0]?.folded ?? 0);
    });
    return upTo === undefined ? { folded } : { folded, next: upTo };
  }

  /** See PG_COUNTS_LOCK; SQLite's single writer already keeps compaction apart. */
  private async shareCountsLock(db: Kysely<DatabaseSchema>): Promise<void> {
    if (this.dialect === 'postgres') await sql`SELECT pg_advisory_xact_lock_shared(${PG_COUNTS_LOCK})`.execute(db);
  }

  /** Runs `change` with its events in one transaction; in one even without events when `atomic`. */
  private write<T>(
    events: EventsFor<NonNullable<T>> | undefined,
    change: (db: Kysely<DatabaseSchema>) => Promise<T>,
    atomic = false,
  ): Promise<T> {
    if (this.outbox && events) return this.outbox.transact(this.db, events, change);
    return atomic ? this.db.transaction().execute(change) : change(this.db);
  }
}

/** A mapping's count now: folded and pending, on `url_mappings` as an UPDATE sees it. */
const CLICK_COUNT_NOW = sql`click_count + COALESCE((SELECT d.delta FROM url_click_deltas AS d WHERE d.url_id = url_mappings.id), 0)`;

/** The columns a change sets: the spec's fields when not null, the limits when defined (null clears). */
function columnChanges(changes: UrlMappingChanges): Record<string, unknown> {
  const { expiresAt, maxVisits, ...fields } = changes;
  const values: Record<string, unknown> = Object.fromEntries(
    Object.entries(fields).filter(([, value]) => value !== null && value !== undefined),
  );
  if (expiresAt !== undefined) values.expires_at = expiresAt && storedInstant(expiresAt);
  if (maxVisits !== undefined) {
    values.max_visits = maxVisits;
    // A limit set on a link that had none counts the clicks it already has (folded and pending).
    if (maxVisits !== null) {
      values.visits_used = sql`CASE WHEN max_visits IS NULL THEN ${CLICK_COUNT_NOW} ELSE visits_used END`;
    }
  }
  return values;
}

const guardHolds = (row: UrlMapping, guard: OwnerGuard | undefined) =>
  guard === undefined || (row.owner ?? null) === guard.owner;

/** The condition of an owner guard on `url_mappings` (always true without one). */
function ownedBy(guard: OwnerGuard | undefined): Expression<SqlBool> {
  if (guard === undefined) return sql<SqlBool>`1 = 1`;
  return guard.owner === null ? sql<SqlBool>`owner_id IS NULL` : sql<SqlBool>`owner_id = ${guard.owner}`;
}
