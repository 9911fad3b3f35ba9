import type { VisitSegmentRow } from '../domain/visit-segment.js';

/** A flush's journal row to write: written at most once whatever its retries (`id`, as a batch's). */
export interface JournalEntry {
  readonly id: string;
  /** The visits it holds. */
  readonly visits: number;
  /** src/domain/visit-journal.ts's bytes (`encodeJournal`). */
  readonly data: Uint8Array;
}

/** A journal row waiting to be merged, and how far it is (the link it is merged through, 0: none). */
export interface JournalRow {
  readonly id: number;
  readonly mergedThrough: number;
  readonly visits: number;
  /** Its bytes, or the JSON text of a row of the first format (src/domain/visit-journal.ts: `decodeJournal` reads both). */
  readonly data: Uint8Array | string;
}

/** One transaction of a merge: the rows it goes on with (as read) and the segments it writes. */
export interface MergeStep {
  readonly rows: readonly Pick<JournalRow, 'id' | 'mergedThrough'>[];
  /**
   * The link the rows are merged through once it commits (a row merged further already keeps its
   * mark); undefined: all of them (they are deleted).
   */
  readonly through: number | undefined;
  readonly segments: readonly VisitSegmentRow[];
}

/** What waits in the journal to be merged. */
export interface JournalBacklog {
  /** Visits in rows not yet merged whole (a row merged in part counts whole). */
  readonly visits: number;
  /** How long ago the oldest row was written, in seconds (0 when none waits). */
  readonly oldestAgeSeconds: number;
}

/** A merge step that committed. */
export interface MergeDone {
  /**
   * Milliseconds the step kept the event loop from requests: its whole time on a synchronous
   * driver (SQLite), only its own JavaScript between statements on an asynchronous one
   * (PostgreSQL). What a merge run sizes its steps by.
   */
  readonly heldMs: number;
}

/**
 * The visit journal (src/domain/visit-journal.ts): what makes a flush's visits durable in one row,
 * until they are merged into segments every few seconds, by any instance.
 *
 * @example
 *   await journal.write({ id: randomUUID(), visits: 2, data: encodeJournal(prepared) });
 *   const rows = await journal.pending(200_000, await journal.mark());
 *   const done = await journal.merge({ rows, through: undefined, segments }); // undefined: rows moved on
 */
export interface VisitJournal {
  /** Writes a flush's row, with its id as a batch's; false if that id was written before. */
  write(entry: JournalEntry): Promise<boolean>;
  /** The newest row's id (0: none): what a merge run goes up to, not after what keeps arriving. */
  mark(): Promise<number>;
  /**
   * The oldest rows waiting, up to id `upTo`, as many as hold about `visits` visits (at least one,
   * when there is one).
   */
  pending(visits: number, upTo?: number): Promise<JournalRow[]>;
  /**
   * Writes the segments, adds them to their links' day rows (they are written folded), and moves
   * the rows on to `through` (or deletes them), in one transaction; undefined, writing nothing,
   * when a row is no longer where `rows` says (another instance merged it meanwhile, or is merging
   * now).
   */
  merge(step: MergeStep): Promise<MergeDone | undefined>;
  /** What waits to be merged (the `visit_journal_*` gauges). */
  backlog(): Promise<JournalBacklog>;
}
