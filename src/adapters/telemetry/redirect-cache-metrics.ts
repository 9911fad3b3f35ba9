import { Counter, type Registry } from 'prom-client';

/** What the metric reads: the redirect cache's running totals. */
export interface CacheLookups {
  readonly hits: number;
  readonly misses: number;
}

/**
 * `redirect_cache_lookups_total{result="hit"|"miss"}`, read from the cache's own totals when
 * scraped (a lookup only adds one to a number). Tells how often redirects wait for the database,
 * and lets the bench check that its uniform mix misses the cache as it means to.
 */
export function registerRedirectCacheMetrics(registry: Registry, lookups: CacheLookups): void {
  new Counter({
    name: 'redirect_cache_lookups_total',
    help: 'Redirect lookups in the in-process cache, by result: hit (known or unknown code cached) or miss (read from the database).',
    labelNames: ['result'],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ result: 'hit' }, lookups.hits);
      this.inc({ result: 'miss' }, lookups.misses);
    },
  });
}
