import type { ImportedLink } from '../domain/link-transfer.js';
import type { EventsFor } from '../domain/events.js';
import type { UrlMapping } from '../domain/url-mapping.js';

/**
 * Where imported links are written, many per transaction. Every adapter passes
 * `test/services/link-transfer.test.ts` on both backends.
 *
 * @example
 *   const rows = await store.insertMany([{ code: 'abc123', url, created_at, click_count: 0, owner: 7, expires_at: null, max_visits: null }]);
 *   // rows[0]: the stored mapping, or undefined when the code was taken
 */
export interface LinkImportStore {
  /**
   * Inserts the links in one transaction, with the events of those written in it; each link's
   * row, or undefined when its code was taken (before, or by another link of the same call).
   * Nothing is written when it throws.
   */
  insertMany(links: readonly ImportedLink[], events?: EventsFor<UrlMapping>): Promise<(UrlMapping | undefined)[]>;
  /** Which of `codes` are taken now (the check of a dry run). */
  takenCodes(codes: readonly string[]): Promise<Set<string>>;
}
