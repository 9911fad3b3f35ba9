import type { Logger } from 'pino';
import { type ConnectionLoss, type Database, openDatabase } from '../adapters/storage/database.js';
import { migrateToLatest } from '../adapters/storage/migrations.js';
import { untilDatabaseAnswers } from '../adapters/storage/until-database-answers.js';
import { databaseConnectionMetrics } from '../adapters/telemetry/database-metrics.js';
import { KyselyTracingPlugin } from '../adapters/telemetry/kysely-tracing-plugin.js';
import type { Metrics } from '../adapters/telemetry/metrics.js';
import type { DatabaseConfig } from '../config/config.js';
import type { CompositionContext } from './context.js';
import { waitingForDatabase } from './startup-failure.js';

/** How often a SQLite database's WAL is checkpointed in the background. */
const SQLITE_CHECKPOINT_INTERVAL_MS = 100;

/** Calls `log` at most once per 10 s: a restart breaks every pooled connection at once. */
function everyFewSeconds(log: (error: Error) => void): (error: Error) => void {
  let last = -Infinity;
  return (error) => {
    const now = performance.now();
    if (now - last < 10_000) return;
    last = now;
    log(error);
  };
}

/** PostgreSQL's pool: each lost connection counted by its cause, and logged at most every few seconds. */
function lostConnections(metrics: Metrics, logger: Logger): (error: Error, cause: ConnectionLoss) => void {
  const count = databaseConnectionMetrics(metrics.registry);
  const log = everyFewSeconds((error) =>
    logger.warn({ err: error.message }, 'database connection lost; the pool opens a new one when next needed'),
  );
  return (error, cause) => {
    count(cause);
    log(error);
  };
}

/** The service's database, traced when tracing is on, with its schema brought up to date once it answers. */
export async function openStorage({ config, logger, stack, metrics }: CompositionContext): Promise<Database> {
  // One span per SQL statement when tracing is on; nothing in the way when it is off.
  const tracing = config.tracing.enabled ? new KyselyTracingPlugin({ dialect: config.database.kind }) : undefined;
  const database = stack.use(
    'database',
    openDatabase(config.database, {
      ...(tracing ? { plugins: [tracing], log: tracing.log } : {}),
      // SQLite: the WAL is copied into the database file off the event loop.
      checkpointIntervalMs: SQLITE_CHECKPOINT_INTERVAL_MS,
      ...(config.database.kind === 'postgres' ? { onConnectionLost: lostConnections(metrics, logger) } : {}),
    }),
  );
  await migrateOnceItAnswers(database, config.database, (line) => logger.warn(line));
  return database;
}

/**
 * Brings `database`'s schema up to date once it answers: a PostgreSQL still starting (or too busy
 * to answer in time) is waited for, DB_START_TIMEOUT_MS at most, and `say` hears that once. What
 * `serve` and `migrate` both do first. The migrations it applied.
 */
export async function migrateOnceItAnswers(
  database: Database,
  config: DatabaseConfig,
  say: (line: string) => void,
): Promise<readonly string[]> {
  const migrated = await untilDatabaseAnswers(
    () => migrateToLatest(database.db, database.dialect),
    config.startTimeoutMs ?? 0,
    (error) => say(waitingForDatabase(error, config)),
  );
  return migrated.applied;
}
