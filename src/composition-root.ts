import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { buildApp } from './app.js';
import type { Config } from './config/config.js';
import { type Database, openDatabase } from './adapters/storage/database.js';
import { KyselyUrlMappingRepository } from './adapters/storage/kysely-url-mapping-repository.js';
import { migrateToLatest } from './adapters/storage/migrations.js';
import { createMetrics } from './adapters/telemetry/metrics.js';
import { RouteTable } from './http/route-table.js';
import { ClickBuffer } from './services/click-buffer.js';
import { RedirectCache } from './services/redirect-cache.js';
import { UrlMappingService } from './services/url-mapping-service.js';

export interface Service {
  readonly app: FastifyInstance;
  readonly database: Database;
  readonly clicks: ClickBuffer;
  /** Stops serving, writes buffered clicks, closes the pools. Idempotent. */
  close(): Promise<void>;
}

export interface ComposeOptions {
  readonly logger?: FastifyServerOptions['logger'];
}

/** The one place that picks adapters from the configuration and wires the service together. */
export async function compose(config: Config, options: ComposeOptions = {}): Promise<Service> {
  const database = openDatabase(config.database);
  try {
    await migrateToLatest(database.db, database.dialect);
  } catch (error) {
    await database.close();
    throw error;
  }
  const repository = new KyselyUrlMappingRepository(database.db);
  const routes = new RouteTable();
  const cache = new RedirectCache(config.redirect.cacheMaxEntries, config.redirect.cacheTtlMs);

  const clicks = new ClickBuffer(repository, config.redirect.clickFlushIntervalMs);
  const urlMappings = new UrlMappingService(repository, cache, clicks, {
    rules: config.urls,
    reservedCodes: () => routes.reservedCodes(),
  });
  const metrics = createMetrics();
  const app = await buildApp({ config, routes, urlMappings, metrics, logger: options.logger });
  clicks.start(app.log);

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      await app.close();
      await clicks.stop();
      await database.close();
    })());
  return { app, database, clicks, close };
}
