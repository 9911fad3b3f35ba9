/**
 * The service's redirect-cache counts (`redirect_cache_lookups_total`), read before and after a
 * scenario's measured rounds: what share of the measured requests missed the cache. The uniform
 * mix over 10,000,000 codes must miss it (its cache holds 100,000 entries by default), or the
 * scenario measures the cache instead of the database.
 */
export interface CacheLookups {
  readonly hits: number;
  readonly misses: number;
}

/** The counts now, or undefined when the target exposes none (the baseline, the ceiling, an older service). */
export async function readCacheLookups(baseUrl: string): Promise<CacheLookups | undefined> {
  try {
    const response = await fetch(`${baseUrl}/metrics`, { signal: AbortSignal.timeout(5_000) });
    if (response.status !== 200) return undefined;
    const text = await response.text();
    const count = (result: string) =>
      Number(new RegExp(`^redirect_cache_lookups_total\\{result="${result}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? NaN);
    const lookups = { hits: count('hit'), misses: count('miss') };
    return Number.isFinite(lookups.hits) && Number.isFinite(lookups.misses) ? lookups : undefined;
  } catch {
    return undefined;
  }
}

/** Misses per lookup between two readings; undefined when either is missing or nothing was looked up. */
export function missRatio(before: CacheLookups | undefined, after: CacheLookups | undefined): number | undefined {
  if (before === undefined || after === undefined) return undefined;
  const misses = after.misses - before.misses;
  const total = misses + after.hits - before.hits;
  return total > 0 ? misses / total : undefined;
}

/** Below this share of misses, a uniform mix larger than the cache is not measuring misses. */
export const UNIFORM_MIN_MISS_RATIO = 0.9;
