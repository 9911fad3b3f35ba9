import type { Page } from './api';
import { isMissingRoute, messageOf } from './failures';

/** Reads the page after `cursor` (the first page when it is undefined). */
export type PageReader<T> = (cursor: string | undefined) => Promise<Page<T>>;

/**
 * A list the server gives a page at a time, as a page shows it: the items of the page shown,
 * whether it loads, what went wrong, and the way back and forth. The cursor of the next page is the
 * `cursorParam` of the `Link: rel="next"` query (`after`, or `before` for newest-first lists).
 */
export class PagedList<T> {
  items = $state<T[]>([]);
  loading = $state(true);
  /** Why the last load failed; empty when it did not. */
  error = $state('');
  /** The server has no such list (404 or 405): an older server. */
  unavailable = $state(false);
  /** Cursors of the pages seen so far; the last one is the page shown (undefined = the first). */
  #cursors = $state<(string | undefined)[]>([undefined]);
  #next = $state<string | null>(null);

  constructor(
    private readonly read: PageReader<T>,
    private readonly cursorParam: 'after' | 'before' = 'after',
  ) {}

  /** 1 for the first page. */
  get pageNumber(): number {
    return this.#cursors.length;
  }

  get hasPrevious(): boolean {
    return this.#cursors.length > 1;
  }

  get hasNext(): boolean {
    return this.#next !== null;
  }

  /** Reads the page shown again (after a change, or to refresh it). */
  async load(): Promise<void> {
    this.loading = true;
    this.error = '';
    try {
      const page = await this.read(this.#cursors.at(-1));
      this.items = page.items;
      this.#next = page.next?.get(this.cursorParam) ?? null;
    } catch (failure) {
      this.error = messageOf(failure);
      this.unavailable = isMissingRoute(failure);
    } finally {
      this.loading = false;
    }
  }

  nextPage(): Promise<void> {
    if (this.#next !== null) this.#cursors = [...this.#cursors, this.#next];
    return this.load();
  }

  previousPage(): Promise<void> {
    this.#cursors = this.#cursors.slice(0, Math.max(1, this.#cursors.length - 1));
    return this.load();
  }

  /** Back to the first page (when what the list shows has changed, e.g. its filter). */
  restart(): Promise<void> {
    this.#cursors = [undefined];
    return this.load();
  }
}
