import { type Kysely, type RawBuilder, sql } from 'kysely';
import type {
  JournalBacklog,
  JournalEntry,
  JournalRow,
  MergeDone,
  MergeStep,
  VisitJournal,
} from '../../ports/visit-journal.js';
import type { Dialect } from './database.js';
import type { DatabaseSchema } from './schema.js';
import { HeldTime, segmentDeltas, VisitDayRows } from './visit-day-rows.js';
import { claimBatch, type SegmentInserter, segmentInserter } from './visit-statements.js';

/**
 * PostgreSQL's advisory lock a merge transaction holds, the schema's: one merges at a time in a
 * schema. Its two keys are this class (any 32-bit constant of ours) and a hash of the schema in
 * use, since a database may hold several services' schemas (tenants, the bench's targets, test
 * runs), whose journals have nothing in common: with one key for the whole database, a merge in
 * one schema made every other schema's merge stop short (a merge run stops where it finds the
 * lock taken), which tests on PostgreSQL saw when two test runs shared the database. (An
 * instance of the version before takes the database's lock, not this one: while both kinds run, a
 * merge of each can meet on the journal rows' locks, and then the second finds the rows moved and
 * writes nothing, or PostgreSQL ends one as a deadlock, which its next run retries.)
 */
const PG_MERGE_LOCK_CLASS = 0x76_6a_6e_6c; // "vjnl"

/** Thrown inside a merge transaction to roll it back: a row had moved on. */
class RowsMoved extends Error {}

/**
 * The visit journal in SQLite or PostgreSQL (`visit_journal`, migration 0077; each row's text in
 * `visit_journal_data`, 0078, deleted with it). A row's id is the
 * order it was written in; its batch id goes to `visit_batches` in the same transaction, as a
 * flush's batch did, so a row whose commit went through but whose answer was lost is not written
 * twice (nor after it was merged). A merge transaction moves its rows on only from where it read
 * them (`merged_through` as read), so two instances that merge at once never write a link's
 * visits twice: the second finds the rows moved and writes nothing. The segments a merge writes are
 * folded as they are written: added to their day rows and listed by link in the same transaction,
 * not read back by a fold later (that read-back, the unfolded list's rows and the fold's own
 * transactions were most of what a visit cost PostgreSQL; bench/PROFILE.md).
 */
export class KyselyVisitJournal implements VisitJournal {
  /** The merge lock's keys (PG_MERGE_LOCK_CLASS), for tests that hold it. */
  static readonly PG_MERGE_LOCK = sql`${PG_MERGE_LOCK_CLASS}, hashtext(current_schema())`;

  private readonly insertSegments: SegmentInserter;
  private readonly dayRows: VisitDayRows;

  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly dialect: Dialect,
    private readonly now: () => number = Date.now,
  ) {
    this.insertSegments = segmentInserter(db, dialect, 'folded');
    this.dayRows = new VisitDayRows(db, dialect);
  }

  write(entry: JournalEntry): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const writtenAt = this.now();
      if (!(await claimBatch(trx, entry.id, writtenAt))) return false;
      const { id } = await trx
        .insertInto('visit_journal')
        .values({ written_at_ms: writtenAt, merged_through: 0, visits: entry.visits })
        .returning('id')
        .executeTakeFirstOrThrow();
      // The text apart (migration 0078): each merge step rewrites the row's mark, never the text.
      await trx
        .insertInto('visit_journal_data')
        .values({ id: Number(id), data: this.stored(entry.data) })
        .execute();
      return true;
    });
  }

  async mark(): Promise<number> {
    const row = await this.db
      .selectFrom('visit_journal')
      .select((eb) => eb.fn.max('id').as('mark'))
      .executeTakeFirst();
    return Number(row?.mark ?? 0);
  }

  async pending(visits: number, upTo = Number.MAX_SAFE_INTEGER): Promise<JournalRow[]> {
    const waiting = await this.db
      .selectFrom('visit_journal')
      .select(['id', 'merged_through', 'visits'])
      .where('id', '<=', upTo)
      .orderBy('id')
      .limit(10_000)
      .execute();
    const taken: typeof waiting = [];
    let total = 0;
    for (const row of waiting) {
      if (taken.length > 0 && total + Number(row.visits) > visits) break;
      taken.push(row);
      total += Number(row.visits);
    }
    if (taken.length === 0) return [];
    const texts = await this.db
      .selectFrom('visit_journal_data')
      .select(['id', 'data'])
      .where(
        'id',
        'in',
        taken.map((row) => row.id),
      )
      .execute();
    const dataOf = new Map(texts.map((row) => [Number(row.id), this.read(row.data)]));
    // A row merged away by another instance between the two reads is left out.
    return taken.flatMap((row) => {
      const data = dataOf.get(Number(row.id));
      return data === undefined
        ? []
        : [{ id: Number(row.id), mergedThrough: Number(row.merged_through), visits: Number(row.visits), data }];
    });
  }

  async merge(step: MergeStep): Promise<MergeDone | undefined> {
    const work = new HeldTime(this.dialect);
    try {
      await this.db.transaction().execute(async (trx) => {
        if (this.dialect === 'postgres') {
          const { rows } = await sql<{
            locked: boolean;
          }>`SELECT pg_try_advisory_xact_lock(${KyselyVisitJournal.PG_MERGE_LOCK}) AS locked`.execute(trx);
          if (!rows[0]?.locked) throw new RowsMoved();
        }
        const where = sql`(id, merged_through) IN ${this.asRead(step.rows)}`;
        const moved =
          step.through === undefined
            ? await sql`DELETE FROM visit_journal WHERE ${where}`.execute(trx)
            : await sql`UPDATE visit_journal SET merged_through = ${this.greatest(sql`merged_through`, step.through)}
                  WHERE ${where}`.execute(trx);
        if (Number(moved.numAffectedRows ?? 0) !== step.rows.length) throw new RowsMoved();
        await this.insertSegments(trx, step.segments);
        await this.dayRows.add(
          trx,
          work.run(() => segmentDeltas(step.segments)),
          work,
        );
      });
      return { heldMs: work.heldMs };
    } catch (error) {
      if (error instanceof RowsMoved) return undefined;
      throw error;
    }
  }

  async backlog(): Promise<JournalBacklog> {
    const row = await this.db
      .selectFrom('visit_journal')
      .select((eb) => [eb.fn.sum<number | string>('visits').as('visits'), eb.fn.min('written_at_ms').as('oldest')])
      .executeTakeFirst();
    const oldest = row?.oldest === null || row?.oldest === undefined ? undefined : Number(row.oldest);
    return {
      visits: Number(row?.visits ?? 0),
      oldestAgeSeconds: oldest === undefined ? 0 : Math.max(0, (this.now() - oldest) / 1_000),
    };
  }

  /**
   * A row's bytes as the column holds them: SQLite a BLOB (in a column declared `text`, which
   * SQLite keeps as it is given); PostgreSQL base64 text, as its column is `text` (a row of
   * the first format is JSON text in both, which base64 never starts like).
   */
  private stored(data: Uint8Array): Uint8Array | string {
    return this.dialect === 'sqlite'
      ? data
      : Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64');
  }

  private read(data: Uint8Array | string): Uint8Array | string {
    return typeof data === 'string' && !data.startsWith('{') ? Buffer.from(data, 'base64') : data;
  }

  /**
   * The greater of a column and a value: a row merged through a later link already (the rest of a
   * merge cut off, read with rows new since) keeps its mark where a step ends before it.
   */
  private greatest(column: RawBuilder<unknown>, value: number) {
    return this.dialect === 'sqlite' ? sql`MAX(${column}, ${value})` : sql`GREATEST(${column}, ${value})`;
  }

  /** The rows as (id, merged_through) pairs to compare with `IN` (one parameter a column, whatever their number). */
  private asRead(rows: MergeStep['rows']) {
    return this.dialect === 'sqlite'
      ? sql`(SELECT value ->> 0, value ->> 1 FROM json_each(${JSON.stringify(rows.map((r) => [r.id, r.mergedThrough]))}))`
      : sql`(SELECT * FROM unnest(CAST(${rows.map((r) => r.id)} AS BIGINT[]), CAST(${rows.map((r) => r.mergedThrough)} AS BIGINT[])))`;
  }
}
