import type { EventsFor, OutgoingEvent } from '../domain/events.js';
import type { ExpiryReason, NewUrlMapping, UrlMapping, UrlMappingChanges } from '../domain/url-mapping.js';

export interface RedirectTarget {
  readonly id: number;
  readonly url: string;
  /** The limits (null or absent for a link without them), and the visits reserved against `max_visits`. */
  readonly expires_at?: string | null;
  readonly max_visits?: number | null;
  readonly visits_used?: number;
}

/** The `url.expired` event of a mapping that stopped answering, for `reason`. */
export type ExpiredEventFor = (mapping: UrlMapping, reason: ExpiryReason) => OutgoingEvent;

/** The answer of `reserveVisit`. */
export interface VisitReservation {
  /** True: this redirect may answer (one of the `max_visits`); false: the limit was reached before it. */
  readonly granted: boolean;
  /** Visits left after this one (0: the link answers no more). */
  readonly remaining: number;
}

/** What `GET /urls` may order by: the id (the default), or a field in either direction. */
export type ListSortField = 'id' | 'created_at' | 'click_count';

export interface ListSort {
  readonly field: ListSortField;
  readonly descending: boolean;
}

export interface ListOptions {
  /**
   * Only mappings after the one with this id in the list's order (keyset paging): with the
   * default order, an id greater than this. When no mapping has this id, the page is empty.
   */
  readonly after?: number;
  /** At most this many; all when absent. */
  readonly limit?: number;
  /** Only the mappings of this user (null: only anonymous ones); every mapping when absent. */
  readonly owner?: number | null;
  /** Only mappings whose code or target URL contains this, ignoring case (answered from an index). */
  readonly q?: string;
  /** Id ascending when absent; ties are broken by id, in the same direction. */
  readonly sort?: ListSort;
}

/** A guard on a change: only when the mapping still has this owner (null: still anonymous). */
export interface OwnerGuard {
  readonly owner: number | null;
}

export interface CompactOptions {
  /** Only the deltas of mappings with an id greater than this (the previous chunk's `next`). */
  readonly after?: number;
  /** At most this many mappings' deltas. */
  readonly limit: number;
}

/** Which write of clicks this is: its writer (one a process start) and its place in that writer's order. */
export interface ClickChunk {
  readonly writer: string;
  readonly seq: number;
  /** When it is written, ms since the epoch (how long its writer is remembered counts from it). */
  readonly at: number;
}

export interface ClickCompaction {
  /** Mappings whose deltas were folded (or dropped, when the mapping is gone). */
  readonly folded: number;
  /** `after` for the next chunk; undefined when this chunk reached the last pending delta. */
  readonly next?: number;
}

/**
 * Where URL mappings live. Every adapter passes `test/contract/url-mapping-repository.contract.ts`.
 *
 * @example
 *   const created = await repo.create({ code: 'abc123', url: 'https://example.com', created_at, click_count: 0 });
 *   await repo.addClicks([[created.id, 3]]);
 */
export interface UrlMappingRepository {
  /** Inserts a mapping; throws `errors.codeConflict()` when the code is taken. */
  create(mapping: NewUrlMapping, events?: EventsFor<UrlMapping>): Promise<UrlMapping>;
  findByCode(code: string): Promise<UrlMapping | undefined>;
  /** The slim read of the redirect path: answered at once where the store can (SQLite), else later. */
  findTarget(code: string): RedirectTarget | undefined | Promise<RedirectTarget | undefined>;
  /** Mappings in the order of `options.sort` (id order by default), filtered as it says. */
  list(options?: ListOptions): Promise<UrlMapping[]>;
  /**
   * Applies the non-null changes (the limits: the defined ones, a null clearing); undefined when
   * no mapping has `code` (with the owner `guard` asks for); throws `codeConflict` on a taken new
   * code. A change of the limits that stops the link records its `url.expired` (`expired`) once;
   * one that makes it answer again lets a later stop record another.
   */
  update(
    code: string,
    changes: UrlMappingChanges,
    events?: EventsFor<UrlMapping>,
    guard?: OwnerGuard,
    expired?: ExpiredEventFor,
  ): Promise<UrlMapping | undefined>;
  /**
   * Reserves one redirect of a link with `max_visits`, atomically across instances (a conditional
   * UPDATE): granted while fewer than `max_visits` were reserved and `expires_at` has not passed.
   * The reservation that takes the last visit records the link's `url.expired` (`expired`) in its
   * transaction. A link without `max_visits` (or no link) is never granted.
   */
  reserveVisit(id: number, expired?: ExpiredEventFor): Promise<VisitReservation>;
  /**
   * Claims up to `limit` links whose `expires_at` has passed and whose `url.expired` is not yet
   * recorded, and records it for each (`expired`) in the claim's transaction: whichever instances
   * sweep at once, each link is claimed once. How many were claimed (fewer than `limit`: done).
   */
  expireDue(limit: number, expired?: ExpiredEventFor): Promise<number>;
  /** Deletes the mapping and returns its id, or undefined when there was none (with the owner `guard` asks for). */
  delete(code: string, events?: EventsFor<number>, guard?: OwnerGuard): Promise<number | undefined>;
  /**
   * Adds click deltas, `[id, delta]`, in one transaction; unknown ids are ignored. Every read
   * counts them at once; they may be kept apart from the mappings until `compactClicks`.
   *
   * With `chunk`, the write is added once: false (nothing added, no events) when its writer has
   * already written that `seq` or a later one. A writer writes its chunks one at a time, in `seq`
   * order, and writes one that failed again before any later one; so a chunk whose commit went
   * through but whose answer was lost is not counted twice. Writers not heard of for a while are
   * forgotten (`forgetClickWriters`).
   */
  addClicks(
    deltas: ReadonlyArray<readonly [id: number, delta: number]>,
    events?: EventsFor<ReadonlyArray<readonly [id: number, delta: number]>>,
    chunk?: ClickChunk,
  ): Promise<boolean>;
  /** Forgets the click writers (see `addClicks`) whose last chunk was written before `before` (ms since the epoch). */
  forgetClickWriters(before: number): Promise<number>;
  /**
   * Folds pending click deltas into the mappings' stored counts, one chunk in id order per call
   * and transaction; no read sees a count change. Each delta is folded once, even when several
   * instances compact at the same time.
   *
   * @example
   *   let after: number | undefined;
   *   do ({ next: after } = await repo.compactClicks({ after, limit: 5000 }));
   *   while (after !== undefined);
   */
  compactClicks(options: CompactOptions): Promise<ClickCompaction>;
}
