import type { EventsFor } from '../domain/events.js';
import type { NewUrlMapping, UrlMapping, UrlMappingChanges } from '../domain/url-mapping.js';

export interface RedirectTarget {
  readonly id: number;
  readonly url: string;
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
   * Applies the non-null changes; undefined when no mapping has `code` (with the owner `guard`
   * asks for); throws `codeConflict` on a taken new code.
   */
  update(
    code: string,
    changes: UrlMappingChanges,
    events?: EventsFor<UrlMapping>,
    guard?: OwnerGuard,
  ): Promise<UrlMapping | undefined>;
  /** Deletes the mapping and returns its id, or undefined when there was none (with the owner `guard` asks for). */
  delete(code: string, events?: EventsFor<number>, guard?: OwnerGuard): Promise<number | undefined>;
  /**
   * Adds click deltas, `[id, delta]`, in one transaction; unknown ids are ignored. Every read
   * counts them at once; they may be kept apart from the mappings until `compactClicks`.
   */
  addClicks(
    deltas: ReadonlyArray<readonly [id: number, delta: number]>,
    events?: EventsFor<ReadonlyArray<readonly [id: number, delta: number]>>,
  ): Promise<void>;
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
