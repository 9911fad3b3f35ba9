import type { Registry } from 'prom-client';
import { EmbeddedLogEventBus } from './adapters/event-bus/embedded-log-event-bus.js';
import { NatsEventBus } from './adapters/event-bus/nats-event-bus.js';
import {
  eachInItsOwnTransaction,
  groupCommitOn,
  TransactionalOutbox,
  type TransactionRunner,
} from './adapters/event-bus/outbox.js';
import { OutboxRelay } from './adapters/event-bus/outbox-relay.js';
import { GroupCommit } from './adapters/storage/group-commit.js';
import type { EventEnvelope } from './domain/events.js';
import type { Database } from './adapters/storage/database.js';
import { createEventMetrics } from './adapters/telemetry/event-metrics.js';
import { otelMessageTracing } from './adapters/telemetry/otel-message-tracing.js';
import { KyselyDeadLetterStore } from './adapters/storage/kysely-dead-letter-store.js';
import type { EventMetrics } from './ports/event-metrics.js';
import type { EventsConfig } from './config/config.js';
import { pruneEventLog } from './adapters/event-bus/event-log-retention.js';
import { KyselyEventStore } from './adapters/storage/kysely-event-store.js';
import type { EventStore } from './ports/event-store.js';
import type { EventBus } from './ports/event-bus.js';
import { ConsumerRunner } from './adapters/event-bus/consumer-runner.js';
import type { ConsumerDefinition } from './ports/event-consumer.js';
import { DeadLetterManager } from './services/dead-letter-manager.js';

export interface BackboneLogger {
  warn(object: unknown, message: string): void;
}

/** The event backbone of one process: bus, outbox and its relay, consumers, dead letters. */
export interface EventBackbone {
  readonly bus: EventBus;
  readonly outbox: TransactionalOutbox;
  /** How write transactions run on the service's database (group commit on SQLite). */
  readonly transactions: TransactionRunner;
  /** Every event, once: what the event-store consumer writes to. */
  readonly eventStore: EventStore;
  readonly relay: OutboxRelay;
  readonly deadLetters: DeadLetterManager;
  readonly metrics: EventMetrics;
  /**
   * The outbox's backlog for the readiness detail: rows waiting for the bus and the oldest one's
   * age. With the embedded bus the log is the outbox, so both stay 0.
   */
  backlog(): Promise<{ outbox_depth: number; outbox_oldest_age_seconds: number }>;
  /** Starts the relay and the given consumers (and, with `prune`, the retention clean-up). */
  start(consumers: readonly ConsumerDefinition[], options: { prune: boolean }): Promise<void>;
  /** Stops the consumers, hands the outbox's last rows to the bus if it can, closes the bus. */
  close(): Promise<void>;
}

const PRUNE_EVERY_MS = 60 * 60 * 1000;
/** Messages an embedded-log consumer reads (and an unordered one is handed) at once. */
export const CONSUMER_BATCH = 250;

/** Part of the composition root: picks the bus adapter (NATS when `NATS_URL` is set) and wires the rest. */
export async function composeEventBackbone(
  config: EventsConfig,
  serviceName: string,
  database: Database,
  registry: Registry,
  logger: BackboneLogger,
): Promise<EventBackbone> {
  // SQLite has one writer, and a commit costs more than a write: writes arriving together share one.
  const groupCommit = database.dialect === 'sqlite' ? groupCommitOn(new GroupCommit(database.db)) : undefined;
  const transactions = groupCommit ?? eachInItsOwnTransaction;
  const bus: EventBus = config.natsUrl
    ? NatsEventBus.open({
        url: config.natsUrl,
        partitions: config.partitions,
        ackWaitMs: config.ackWaitMs,
        retryDelayMs: config.retryBackoffMs,
        prefix: config.natsPrefix,
        retentionMs: config.retentionMs,
        duplicateWindowMs: 2 * 60 * 1000,
      })
    : new EmbeddedLogEventBus(database.db, {
        partitions: config.partitions,
        leaseMs: config.leaseMs,
        pollMs: config.pollMs,
        retryDelayMs: config.retryBackoffMs,
        batchSize: CONSUMER_BATCH,
        transactions: groupCommit,
      });
  const metrics = createEventMetrics(registry, () => relay.backlog());
  const published = (topic: string, envelope: EventEnvelope) => metrics.published(topic, envelope.event_type);
  const outbox = new TransactionalOutbox(serviceName, {
    transactions,
    // The embedded bus is a log in this same database: the log is the outbox.
    log: bus instanceof EmbeddedLogEventBus ? bus : undefined,
    onPublished: published,
    maxEventBytes: config.maxEventBytes,
  });
  // With the embedded bus too: it moves rows an earlier deployment on NATS left into the log.
  const relay = new OutboxRelay(
    database.db,
    bus,
    outbox,
    { pollMs: config.pollMs, batchSize: 200, leaseMs: config.leaseMs, retryDelayMs: 500 },
    logger,
    { published, deadLettered: (topic, eventType) => metrics.outboxDeadLettered(topic, eventType) },
  );
  const runner = new ConsumerRunner(
    bus,
    { attempts: config.handlerAttempts, backoffMs: config.retryBackoffMs, maxBackoffMs: config.retryMaxBackoffMs },
    metrics,
    logger,
    serviceName,
  );
  const deadLetters = new DeadLetterManager(
    { store: new KyselyDeadLetterStore(database.db), bus, metrics, tracing: otelMessageTracing },
    { maxRetries: config.dlqMaxRetries, retryDelayMs: config.dlqRetryDelayMs },
    serviceName,
  );
  const eventStore = new KyselyEventStore(database.db, transactions);
  let pruner: NodeJS.Timeout | undefined;

  return {
    bus,
    outbox,
    transactions,
    eventStore,
    relay,
    deadLetters,
    metrics,
    async backlog() {
      const { depth, oldestAgeSeconds } = await relay.backlog();
      return { outbox_depth: depth, outbox_oldest_age_seconds: oldestAgeSeconds };
    },
    async start(consumers, options) {
      relay.start();
      for (const consumer of consumers) await runner.start(consumer);
      if (options.prune) {
        const pruneOnce = async (olderThan: number) => {
          await eventStore.prune(olderThan);
          await pruneEventLog(database.db, olderThan);
        };
        const prune = () =>
          pruneOnce(Date.now() - config.retentionMs).catch((error: unknown) =>
            logger.warn({ err: error }, 'event retention clean-up failed'),
          );
        void prune();
        pruner = setInterval(() => void prune(), PRUNE_EVERY_MS);
        pruner.unref();
      }
    },
    async close() {
      clearInterval(pruner);
      await runner.stop();
      await relay.stop();
      await relay.drain().catch(() => undefined); // the broker may be away: the rows wait in the outbox
      await bus.close();
    },
  };
}
