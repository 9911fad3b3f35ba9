import type { EventsFor } from '../domain/events.js';
import type { NewUrlMapping, UrlMapping, UrlMappingChanges } from '../domain/url-mapping.js';

export interface RedirectTarget {
  readonly id: number;
  readonly url: string;
}

export interface ListOptions {
  /** Only mappings with an id greater than this. */
  readonly after?: number;
  /** At most this many; all when absent. */
  readonly limit?: number;
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
  /** The slim read of the redirect path. */
  findTarget(code: string): Promise<RedirectTarget | undefined>;
  /** Mappings in id order. */
  list(options?: ListOptions): Promise<UrlMapping[]>;
  /** Applies the non-null changes; undefined when no mapping has `code`; throws `codeConflict` on a taken new code. */
  update(code: string, changes: UrlMappingChanges, events?: EventsFor<UrlMapping>): Promise<UrlMapping | undefined>;
  /** Deletes the mapping and returns its id, or undefined when there was none. */
  delete(code: string, events?: EventsFor<number>): Promise<number | undefined>;
  /** Adds click deltas, `[id, delta]`, in one transaction; unknown ids are ignored. */
  addClicks(
    deltas: ReadonlyArray<readonly [id: number, delta: number]>,
    events?: EventsFor<ReadonlyArray<readonly [id: number, delta: number]>>,
  ): Promise<void>;
}
