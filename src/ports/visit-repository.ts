import type { VisitRecord } from '../domain/visit.js';
import type { VisitDay } from '../domain/visit-day.js';
import type { VisitSegmentRow } from '../domain/visit-segment.js';

/** Segments written in one transaction, at most once whatever its retries (`id`). */
export interface VisitBatch {
  /** Unique per batch; a batch whose id is already recorded is not written again. */
  readonly id: string;
  /** The visits, as segments (src/domain/visit-segment.ts), by mapping. */
  readonly segments: readonly VisitSegmentRow[];
  /** The visits the segments hold. */
  readonly visits: number;
}

export interface StatsRange {
  readonly urlId: number;
  /** Unix milliseconds, inclusive. */
  readonly from: number;
  /** Unix milliseconds, exclusive. */
  readonly to: number;
}

/** One UTC day's rollup row of a mapping (`day`: Unix days). */
export interface StoredVisitDay {
  readonly day: number;
  readonly data: VisitDay;
}

export interface VisitPageQuery extends StatsRange {
  readonly limit: number;
  /** The last row of the previous page (newest first). */
  readonly before?: { readonly visitedAt: number; readonly id: number };
}

export interface VisitPageRow extends VisitRecord {
  readonly id: number;
}

/** What a fold step did: how many segments it folded, and the mapping it went through (undefined: none was left). */
export interface FoldStep {
  readonly segments: number;
  readonly through: number | undefined;
  /**
   * Milliseconds the step kept the event loop from requests: its whole time on a synchronous
   * driver (SQLite), only its own JavaScript between statements on an asynchronous one
   * (PostgreSQL, where waiting for the server holds nothing). What the run sizes its steps by.
   */
  readonly heldMs: number;
}

/** Visits, their day rows and the day salts, in the service's database. */
export interface VisitRepository {
  /**
   * Writes the batch's segments, in one transaction; false if it was written before. (The service
   * writes visits through the journal, src/ports/visit-journal.ts, whose merge writes segments;
   * this writes them directly: migrations' and tests' data.)
   */
  writeBatch(batch: VisitBatch): Promise<boolean>;
  /** The newest visit segment not yet folded (0: none): what a fold run goes up to. */
  foldMark(): Promise<number>;
  /** Whether any segment up to `upTo` is not folded yet (another instance's fold may hold it). */
  unfoldedUpTo(upTo: number): Promise<boolean>;
  /**
   * One step of a fold run: adds the visit segments not yet folded, up to segment `upTo`, of the
   * mappings after mapping id `after` (0: from the first), about `segments` of them, to the day
   * rows. A run starts at 0 and goes on from each step's `through` until it is undefined.
   * Statistics count what is not folded yet as well: folding changes what they read, not what
   * they say.
   */
  fold(segments: number, upTo: number, after: number): Promise<FoldStep>;
  /** The salt of UTC day `day`, made by the first instance that asks. */
  daySalt(day: number): Promise<string>;
  /** The day rows of the whole UTC days the range touches (with what is not folded yet), in day order. */
  days(range: StatsRange): Promise<StoredVisitDay[]>;
  /** Newest first. */
  page(query: VisitPageQuery): Promise<VisitPageRow[]>;
  /**
   * Deletes visits older than `before` (Unix ms), up to `limit` segments of them, and the day rows
   * of the days wholly before it, the salts of days before `hashesBefore` (Unix days), and batch
   * ids written before `batchesBefore`; how many segments and visits it deleted.
   */
  prune(options: {
    before: number;
    hashesBefore: number;
    batchesBefore: number;
    limit: number;
  }): Promise<{ segments: number; visits: number }>;
}
