import type { Database } from '../adapters/storage/database.js';
import { KyselyUrlMappingRepository } from '../adapters/storage/kysely-url-mapping-repository.js';
import { registerRedirectCacheMetrics } from '../adapters/telemetry/redirect-cache-metrics.js';
import { urlEvents } from '../domain/url-events.js';
import { RouteTable } from '../http/route-table.js';
import { UrlMappingService } from '../services/url-mapping-service.js';
import { ClickBuffer } from '../support/click-buffer.js';
import { RedirectCache } from '../support/redirect-cache.js';
import type { CompositionContext } from './context.js';
import type { EventBackbone } from './event-backbone.js';

/** How long "no such code" is cached: a code created elsewhere shows up here within this even without its event. */
const UNKNOWN_CODE_TTL_MS = 1000;

export interface UrlMappings {
  readonly service: UrlMappingService;
  /** The app's routes, whose first path segments no code may take. */
  readonly routes: RouteTable;
  readonly cache: RedirectCache;
  readonly clicks: ClickBuffer;
}

/**
 * Shorten, resolve, list, change, delete: the repository (its events through the outbox), the
 * redirect cache, and the click buffer, whose last clicks are written when the service stops.
 */
export function composeUrlMappings(
  { config, stack, metrics }: CompositionContext,
  database: Database,
  backbone: EventBackbone,
): UrlMappings {
  const events = urlEvents(config.tracing.serviceName);
  const repository = new KyselyUrlMappingRepository(database.db, database.dialect, backbone.outbox, database.reader);
  const routes = new RouteTable();
  const cache = new RedirectCache(config.redirect.cacheMaxEntries, config.redirect.cacheTtlMs, UNKNOWN_CODE_TTL_MS);
  registerRedirectCacheMetrics(metrics.registry, cache.lookups);
  const clicks = new ClickBuffer(
    repository,
    {
      flushIntervalMs: config.redirect.clickFlushIntervalMs,
      compactIntervalMs: config.redirect.clickCompactIntervalMs,
    },
    events.clicked,
  );
  stack.defer('click flush', () => clicks.stop());
  const service = new UrlMappingService(repository, cache, clicks, {
    rules: config.urls,
    reservedCodes: () => routes.reservedCodes(),
    events,
  });
  return { service, routes, cache, clicks };
}
