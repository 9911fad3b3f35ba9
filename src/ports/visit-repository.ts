import type { VisitDimension, VisitRecord } from '../domain/visit.js';

/** A visitor of one mapping on one UTC day: 48 bits of the day's salted hash. */
export interface VisitorSighting {
  readonly urlId: number;
  readonly day: number;
  readonly hash: number;
}

/** What one flush writes, in one transaction, at most once whatever its retries (`id`). */
export interface VisitBatch {
  /** Unique per batch; a batch whose id is already recorded is not written again. */
  readonly id: string;
  readonly visits: readonly VisitRecord[];
  readonly visitors: readonly VisitorSighting[];
}

/** Rollup increments, as a batch of visits adds them (the bench seeds through this too). */
export interface VisitRollups {
  /** `url_id:hour` → [visits, bots]. */
  readonly hourly: ReadonlyMap<string, readonly [visits: number, bots: number]>;
  /** `url_id:day:dimension:value` → visits. */
  readonly daily: ReadonlyMap<string, number>;
}

export interface StatsRange {
  readonly urlId: number;
  /** Unix milliseconds, inclusive. */
  readonly from: number;
  /** Unix milliseconds, exclusive. */
  readonly to: number;
}

export interface HourlyCount {
  readonly hour: number;
  readonly visits: number;
  readonly bots: number;
}

export interface DimensionCount {
  readonly dimension: VisitDimension;
  /** null: unknown / direct. */
  readonly value: string | null;
  readonly visits: number;
}

export interface VisitPageQuery extends StatsRange {
  readonly limit: number;
  /** The last row of the previous page (newest first). */
  readonly before?: { readonly visitedAt: number; readonly id: number };
}

export interface VisitPageRow extends VisitRecord {
  readonly id: number;
}

/** Visits, their rollups and the visitor hashes, in the service's database. */
export interface VisitRepository {
  /** Writes the batch's visits and adds them to the rollups, in one transaction; false if it was written before. */
  writeBatch(batch: VisitBatch): Promise<boolean>;
  /** The salt of UTC day `day`, made by the first instance that asks. */
  daySalt(day: number): Promise<string>;
  /** Visits and bots per hour, or per UTC day (`hoursPerRow` 24; `hour` the day's first). */
  hourly(range: StatsRange, hoursPerRow?: 1 | 24): Promise<HourlyCount[]>;
  /** Visits per dimension value over the whole UTC days the range touches. */
  dimensions(range: StatsRange): Promise<DimensionCount[]>;
  /** Distinct visitors per day, summed over the whole UTC days the range touches. */
  uniqueVisitors(range: StatsRange): Promise<number>;
  /** Newest first. */
  page(query: VisitPageQuery): Promise<VisitPageRow[]>;
  /**
   * Deletes up to `limit` visits older than `before` (Unix ms) and the rollups of the hours and
   * days wholly before it, the visitor hashes and salts of days before `hashesBefore` (Unix
   * days), and batch ids written before `batchesBefore`; how many visits it deleted.
   */
  prune(options: { before: number; hashesBefore: number; batchesBefore: number; limit: number }): Promise<number>;
}
