import { LRUCache } from 'lru-cache';

/** What the redirect path needs of a mapping. */
export interface CachedTarget {
  readonly id: number;
  /** The `Location` header value, ready to send. */
  readonly location: string;
  /** Only for a link with `expires_at` or `max_visits`: checked on every redirect, no lookup. */
  readonly limits?: CachedLimits;
}

/** A link's lifecycle limits as the redirect path checks them. */
export interface CachedLimits {
  /** `expires_at` in epoch milliseconds, and as stored (for the 410's detail). */
  readonly expiresAt: number | undefined;
  readonly expiresText: string | undefined;
  readonly maxVisits: number | undefined;
  /** True once this instance knows every visit is used (a reservation was refused or took the last). */
  exhausted: boolean;
}

const UNKNOWN = Symbol('unknown code');
type Entry = CachedTarget | typeof UNKNOWN;

/**
 * A bounded, time-limited read-through cache of code → redirect target, with negative entries
 * for unknown codes. Loads of the same code are coalesced, and an invalidation makes any load
 * already under way unable to write its (possibly stale) answer back.
 */
export class RedirectCache {
  private readonly entries: LRUCache<string, Entry> | undefined;
  private readonly loading = new Map<string, Promise<CachedTarget | undefined>>();

  private readonly unknownTtlMs: number;
  /** Lookups answered from the cache (known or unknown codes) and lookups that missed it, since start. */
  readonly lookups = { hits: 0, misses: 0 };

  /**
   * @param ttlMs how long a known code is trusted without a word from the bus
   * @param unknownTtlMs how long "no such code" is trusted (shorter: a miss is cheap to repeat)
   */
  constructor(maxEntries: number, ttlMs: number, unknownTtlMs = ttlMs) {
    this.unknownTtlMs = Math.min(ttlMs, unknownTtlMs);
    this.entries =
      maxEntries > 0 && ttlMs > 0
        ? new LRUCache<string, Entry>({ max: maxEntries, ttl: ttlMs, ttlAutopurge: false, updateAgeOnGet: false })
        : undefined;
  }

  /** The cached answer: a target, `null` for a known-unknown code, `undefined` for a miss. */
  peek(code: string): CachedTarget | null | undefined {
    const entry = this.entries?.get(code);
    if (entry === undefined) this.lookups.misses++;
    else this.lookups.hits++;
    return entry === UNKNOWN ? null : entry;
  }

  /**
   * Loads through `load` on a miss. An answer given at once is cached at once; a later one is
   * shared among concurrent callers, and cached only if `code` was not invalidated meanwhile.
   */
  load(
    code: string,
    load: () => CachedTarget | undefined | Promise<CachedTarget | undefined>,
  ): CachedTarget | undefined | Promise<CachedTarget | undefined> {
    const pending = this.loading.get(code);
    if (pending) return pending;
    const loaded = load();
    if (!(loaded instanceof Promise)) {
      this.store(code, loaded);
      return loaded;
    }
    const promise = loaded.then(
      (target) => {
        if (this.loading.get(code) === promise) {
          this.loading.delete(code);
          this.store(code, target);
        }
        return target;
      },
      (error: unknown) => {
        if (this.loading.get(code) === promise) this.loading.delete(code);
        throw error;
      },
    );
    this.loading.set(code, promise);
    return promise;
  }

  /** Forgets `code`, including a load under way, so the next read goes to the database. */
  invalidate(code: string): void {
    this.entries?.delete(code);
    this.loading.delete(code);
  }

  private store(code: string, target: CachedTarget | undefined): void {
    if (target) this.entries?.set(code, target);
    else this.entries?.set(code, UNKNOWN, { ttl: this.unknownTtlMs });
  }

  get size(): number {
    return this.entries?.size ?? 0;
  }
}
