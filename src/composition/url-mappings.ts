import type { Database } from '../adapters/storage/database.js';
import { KyselyLinkImportStore } from '../adapters/storage/kysely-link-import-store.js';
import { KyselyUrlMappingRepository } from '../adapters/storage/kysely-url-mapping-repository.js';
import { BACKGROUND_SPANS, inBackgroundSpan, tracedClickWrites } from '../adapters/telemetry/background-spans.js';
import { registerRedirectCacheMetrics } from '../adapters/telemetry/redirect-cache-metrics.js';
import { urlEvents } from '../domain/url-events.js';
import { RouteTable } from '../http/route-table.js';
import type { RuntimeSettings } from '../services/runtime-settings.js';
import { LinkTransferService } from '../services/link-transfer-service.js';
import { UrlMappingService } from '../services/url-mapping-service.js';
import { ClickBuffer } from '../support/click-buffer.js';
import { PeriodicTask } from '../support/periodic-task.js';
import { RedirectCache } from '../support/redirect-cache.js';
import type { CompositionContext } from './context.js';
import type { EventBackbone } from './event-backbone.js';
import { composeVisits, type Visits } from './visits.js';

/** SQLite's search index: new mappings are added every SEARCH_INDEX_INTERVAL_MS, SEARCH_INDEX_CHUNK per transaction. */
const SEARCH_INDEX_INTERVAL_MS = 1000;
const SEARCH_INDEX_CHUNK = 500;
/** At most this many chunks a run, so that a backlog is worked off without holding the writer for long. */
const SEARCH_INDEX_CHUNKS_PER_RUN = 40;

/** Links whose `expires_at` passed get their `url.expired` within this (the sweep's period), EXPIRY_CHUNK per transaction. */
const EXPIRY_SWEEP_INTERVAL_MS = 1000;
const EXPIRY_CHUNK = 500;

/** How long "no such code" is cached: a code created elsewhere shows up here within this even without its event. */
const UNKNOWN_CODE_TTL_MS = 1000;

export interface UrlMappings {
  readonly service: UrlMappingService;
  /** Export and import of links (the API's and the command line's). */
  readonly transfer: LinkTransferService;
  /** The app's routes, whose first path segments no code may take. */
  readonly routes: RouteTable;
  readonly cache: RedirectCache;
  readonly clicks: ClickBuffer;
  readonly visits: Visits;
}

/**
 * A background task run every `intervalMs` in chunks, each its own transaction, until `chunk`
 * (given its number in the run) says there is no more; requests get the writer in between.
 */
function startChunkedTask(
  { logger, stack }: CompositionContext,
  name: string,
  intervalMs: number,
  chunk: (index: number) => Promise<boolean>,
): void {
  const task = new PeriodicTask(
    name,
    intervalMs,
    async () => {
      for (let index = 0; await chunk(index); index++) await new Promise((resolve) => setImmediate(resolve));
    },
    logger,
  );
  task.start();
  stack.defer(name, () => task.stop());
}

/**
 * Shorten, resolve, list, change, delete: the repository (its events through the outbox), the
 * redirect cache, and the click buffer, whose last clicks are written when the service stops.
 */
export function composeUrlMappings(
  context: CompositionContext,
  database: Database,
  backbone: EventBackbone,
  settings: RuntimeSettings,
  /**
   * `background: false` (a command-line run): SQLite's search index, the expiry sweep and visit
   * retention are not run here (a serving process does them).
   */
  { background = true }: { background?: boolean } = {},
): UrlMappings {
  const { config, stack, metrics } = context;
  const events = urlEvents(config.tracing.serviceName);
  const repository = new KyselyUrlMappingRepository(database.db, database.dialect, backbone.outbox, database.reader);
  const routes = new RouteTable();
  const cache = new RedirectCache(config.redirect.cacheMaxEntries, config.redirect.cacheTtlMs, UNKNOWN_CODE_TTL_MS);
  registerRedirectCacheMetrics(metrics.registry, cache.lookups);
  const clicks = new ClickBuffer(
    config.tracing.enabled ? tracedClickWrites(repository) : repository,
    {
      flushIntervalMs: config.redirect.clickFlushIntervalMs,
      compactIntervalMs: config.redirect.clickCompactIntervalMs,
    },
    events.clicked,
  );
  stack.defer('click flush', () => clicks.stop());
  const visits = composeVisits(context, database, repository, { background });
  if (database.dialect === 'sqlite' && background) {
    startChunkedTask(
      context,
      'search indexing',
      SEARCH_INDEX_INTERVAL_MS,
      async (chunk) =>
        (await repository.indexSearch(SEARCH_INDEX_CHUNK)) > 0 && chunk + 1 < SEARCH_INDEX_CHUNKS_PER_RUN,
    );
  }
  const service = new UrlMappingService(repository, cache, clicks, {
    rules: config.urls,
    reservedCodes: () => routes.reservedCodes(),
    events,
    // The runtime setting: a change by an administrator applies on every instance within a second.
    writePolicy: () => settings.current().link_write_policy ?? config.links.writePolicy,
    codeLength: config.links.codeLength,
    visits: visits.buffer,
    isBot: visits.isBot,
  });
  const transfer = composeLinkTransfer(config, database, backbone, { repository, routes, cache, clicks });
  // Who notices expiry by time when nobody visits: every instance sweeps; the claim in the
  // database (expired_event_at) makes each link's url.expired once, whichever instance records it.
  if (background)
    startChunkedTask(
      context,
      'expiry sweep',
      EXPIRY_SWEEP_INTERVAL_MS,
      async () =>
        (await inBackgroundSpan(BACKGROUND_SPANS.linkExpiry, {}, () => service.expireDue(EXPIRY_CHUNK))) ===
        EXPIRY_CHUNK,
    );
  return { service, transfer, routes, cache, clicks, visits };
}

/** Import and export: the mappings' repository for reading, a store of its own for the batched writes. */
function composeLinkTransfer(
  config: CompositionContext['config'],
  database: Database,
  backbone: EventBackbone,
  {
    repository,
    routes,
    cache,
    clicks,
  }: Pick<UrlMappings, 'routes' | 'cache' | 'clicks'> & {
    repository: KyselyUrlMappingRepository;
  },
): LinkTransferService {
  return new LinkTransferService(
    repository,
    new KyselyLinkImportStore(database.db, database.dialect, backbone.outbox),
    {
      rules: config.urls,
      reservedCodes: () => routes.reservedCodes(),
      events: urlEvents(config.tracing.serviceName),
      counts: clicks,
      created: (code) => cache.invalidate(code),
    },
  );
}
