import { errors } from '../domain/errors.js';
import {
  assertCodeNotReserved,
  assertValidClickCount,
  assertValidTargetUrl,
  locationFor,
  normaliseCreatedAt,
  type NewUrlMapping,
  type UrlMapping,
  type UrlMappingChanges,
  type UrlRules,
} from '../domain/url-mapping.js';
import type { UrlEventFactory } from '../domain/url-events.js';
import type { ListOptions, RedirectTarget, UrlMappingRepository } from '../ports/url-mapping-repository.js';
import type { ClickBuffer } from '../support/click-buffer.js';
import { fetchPage } from '../support/paging.js';
import type { CachedTarget, RedirectCache } from '../support/redirect-cache.js';

export interface UrlMappingServiceOptions {
  readonly rules: UrlRules;
  /** Lower-case first path segments of the service's own routes; codes equal to one are refused. */
  readonly reservedCodes: () => ReadonlySet<string>;
  /** When set, each change records its `url.*` event in the change's transaction. */
  readonly events?: UrlEventFactory;
}

const cachedTarget = (target: RedirectTarget | undefined): CachedTarget | undefined =>
  target && { id: target.id, location: locationFor(target.url) };

/** The URL-mapping use cases: shorten, resolve, list, update, delete. */
export class UrlMappingService {
  constructor(
    private readonly repository: UrlMappingRepository,
    private readonly cache: RedirectCache,
    private readonly clicks: ClickBuffer,
    private readonly options: UrlMappingServiceOptions,
  ) {}

  async shorten(input: NewUrlMapping): Promise<UrlMapping> {
    assertCodeNotReserved(input.code, this.options.reservedCodes());
    assertValidTargetUrl(input.url, this.options.rules);
    assertValidClickCount(input.click_count);
    const events = this.options.events;
    const created = await this.repository.create(
      { ...input, created_at: normaliseCreatedAt(input.created_at) },
      events && ((row) => [events.created(row)]),
    );
    this.cache.invalidate(created.code); // drops a cached "unknown code"
    return created;
  }

  /**
   * The `Location` for `code`, counting the click unless `count` is false (HEAD).
   * On a cache hit this never touches the database.
   */
  resolve(code: string, count: boolean): CachedTarget | Promise<CachedTarget> {
    const cached = this.cache.peek(code);
    if (cached === null) throw errors.mappingNotFound();
    const target = cached ?? this.cache.load(code, () => this.loadTarget(code));
    return target instanceof Promise ? target.then((t) => this.found(t, count)) : this.found(target, count);
  }

  /** Mappings in id order; `nextAfter` is set when rows beyond this page exist. */
  async list(options: ListOptions): Promise<{ mappings: UrlMapping[]; nextAfter?: number }> {
    const { items, more } = await fetchPage(options.limit, (limit) => this.repository.list({ ...options, limit }));
    const mappings = items.map((row) => this.withPendingClicks(row));
    return more ? { mappings, nextAfter: mappings[mappings.length - 1]!.id } : { mappings };
  }

  async update(code: string, changes: UrlMappingChanges): Promise<UrlMapping> {
    if (changes.code != null) assertCodeNotReserved(changes.code, this.options.reservedCodes());
    if (changes.url != null) assertValidTargetUrl(changes.url, this.options.rules);
    if (changes.click_count != null) assertValidClickCount(changes.click_count);
    const normalised: UrlMappingChanges = {
      ...changes,
      created_at: changes.created_at == null ? null : normaliseCreatedAt(changes.created_at),
    };
    if (changes.click_count != null) {
      const current = await this.repository.findByCode(code);
      if (current) await this.clicks.discard(current.id);
    }
    const events = this.options.events;
    const updated = await this.repository.update(code, normalised, events && ((row) => [events.updated(code, row)]));
    this.cache.invalidate(code);
    if (updated === undefined) throw errors.mappingNotFound();
    if (updated.code !== code) this.cache.invalidate(updated.code);
    return this.withPendingClicks(updated);
  }

  async delete(code: string): Promise<void> {
    const events = this.options.events;
    const id = await this.repository.delete(code, events && ((deleted) => [events.deleted(deleted, code)]));
    this.cache.invalidate(code);
    if (id === undefined) throw errors.mappingNotFound();
    await this.clicks.discard(id);
  }

  /** At once when the repository answers at once (SQLite). */
  private loadTarget(code: string): CachedTarget | undefined | Promise<CachedTarget | undefined> {
    const target = this.repository.findTarget(code);
    return target instanceof Promise ? target.then(cachedTarget) : cachedTarget(target);
  }

  private found(target: CachedTarget | undefined, count: boolean): CachedTarget {
    if (target === undefined) throw errors.mappingNotFound();
    if (count) this.clicks.record(target.id);
    return target;
  }

  private withPendingClicks(row: UrlMapping): UrlMapping {
    const pending = this.clicks.pending(row.id);
    return pending === 0 ? row : { ...row, click_count: row.click_count + pending };
  }
}
