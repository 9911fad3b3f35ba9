import { BACKGROUND_SPANS, inBackgroundSpan, tracedEventStore } from '../adapters/telemetry/background-spans.js';
import { ConsumerRunner } from '../adapters/event-bus/consumer-runner.js';
import { EmbeddedLogEventBus } from '../adapters/event-bus/embedded-log/embedded-log-event-bus.js';
import { pruneEventLog } from '../adapters/event-bus/event-log-retention.js';
import { NatsEventBus } from '../adapters/event-bus/nats-event-bus.js';
import {
  eachInItsOwnTransaction,
  groupCommitOn,
  TransactionalOutbox,
  type TransactionRunner,
} from '../adapters/event-bus/outbox.js';
import { OutboxRelay } from '../adapters/event-bus/outbox-relay.js';
import { isDatabaseAway } from '../adapters/storage/connection-errors.js';
import type { Database } from '../adapters/storage/database.js';
import { GroupCommit } from '../adapters/storage/group-commit.js';
import { KyselyDeadLetterStore } from '../adapters/storage/kysely-dead-letter-store.js';
import { KyselyEventStore } from '../adapters/storage/kysely-event-store.js';
import { createEventMetrics } from '../adapters/telemetry/event-metrics.js';
import { otelMessageTracing } from '../adapters/telemetry/otel-message-tracing.js';
import type { EventsConfig } from '../config/config.js';
import type { EventEnvelope } from '../domain/events.js';
import type { EventBus } from '../ports/event-bus.js';
import type { ConsumerDefinition } from '../ports/event-consumer.js';
import type { EventMetrics } from '../ports/event-metrics.js';
import type { EventStore } from '../ports/event-store.js';
import { DeadLetterManager } from '../services/dead-letter-manager.js';
import type { CompositionContext } from './context.js';

/** The event backbone of one process: bus, outbox and its relay, consumers, dead letters. */
export interface EventBackbone {
  readonly bus: EventBus;
  readonly outbox: TransactionalOutbox;
  readonly relay: OutboxRelay;
  /** Every event, once: what the event-store consumer writes to. */
  readonly eventStore: EventStore;
  readonly deadLetters: DeadLetterManager;
  readonly metrics: EventMetrics;
  /**
   * The outbox's backlog for the readiness detail: rows waiting for the bus and the oldest one's
   * age. With the embedded bus the log is the outbox, so both stay 0.
   */
  backlog(): Promise<{ outbox_depth: number; outbox_oldest_age_seconds: number }>;
  /** Starts the relay and the given consumers (and, with `prune`, the retention clean-up). */
  start(consumers: readonly ConsumerDefinition[], options: { prune: boolean }): Promise<void>;
}

const PRUNE_EVERY_MS = 60 * 60 * 1000;
/** Messages an embedded-log consumer reads (and an unordered one is handed) at once. */
export const CONSUMER_BATCH = 250;

/** NATS when `NATS_URL` is set; else the embedded log in the service's database. */
function openBus(config: EventsConfig, database: Database, groupCommit: TransactionRunner | undefined): EventBus {
  return config.natsUrl
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
        dialect: database.dialect,
      });
}

/**
 * The outbox (the embedded log itself, with the embedded bus) and its relay, which hands what
 * the outbox holds to the bus; on shutdown the relay hands over the last rows if it can.
 */
function composeOutbox(
  { config, logger, stack, metrics: processMetrics }: CompositionContext,
  database: Database,
  bus: EventBus,
  transactions: TransactionRunner,
) {
  const events = config.events;
  const metrics = createEventMetrics(processMetrics.registry, () => relay.backlog());
  const published = (topic: string, envelope: EventEnvelope) => metrics.published(topic, envelope.event_type);
  const outbox = new TransactionalOutbox(config.tracing.serviceName, {
    transactions,
    // The embedded bus is a log in this same database: the log is the outbox.
    log: bus instanceof EmbeddedLogEventBus ? bus : undefined,
    onPublished: published,
    maxEventBytes: events.maxEventBytes,
    messagingSystem: bus.system,
  });
  // With the embedded bus too: it moves rows an earlier deployment on NATS left into the log.
  const relay = new OutboxRelay(
    database.db,
    bus,
    outbox,
    { pollMs: events.pollMs, batchSize: 200, leaseMs: events.leaseMs, retryDelayMs: 500 },
    logger,
    { published, deadLettered: (topic, eventType) => metrics.outboxDeadLettered(topic, eventType) },
  );
  stack.defer('outbox relay', async () => {
    await relay.stop();
    await relay.drain().catch(() => undefined); // the broker may be away: the rows wait in the outbox
  });
  return { outbox, relay, metrics };
}

/** Deletes stored events and log entries past EVENT_RETENTION_MS: now, then every hour, once started. */
function eventRetention({ config, logger, stack }: CompositionContext, database: Database, eventStore: EventStore) {
  let timer: NodeJS.Timeout | undefined;
  stack.defer('event retention', () => clearInterval(timer));
  const prune = async () => {
    const olderThan = Date.now() - config.events.retentionMs;
    try {
      await eventStore.prune(olderThan);
      await inBackgroundSpan(BACKGROUND_SPANS.eventLogPrune, {}, () => pruneEventLog(database.db, olderThan));
    } catch (error) {
      logger.warn({ err: error }, 'event retention clean-up failed');
    }
  };
  return {
    start() {
      void prune();
      timer = setInterval(() => void prune(), PRUNE_EVERY_MS);
      timer.unref();
    },
  };
}

/** A broker that has not answered by then is reported in the log, instead of waiting in silence. */
export const NATS_SILENCE_MS = 2000;

/**
 * NATS away at start is not fatal (the outbox keeps the events, consumers start once it answers),
 * but it is said at once, naming the setting to check, and said again when it answers.
 */
function sayWhileNatsIsAway(bus: NatsEventBus, logger: CompositionContext['logger']): void {
  let away = false;
  const timer = setTimeout(() => {
    away = true;
    logger.warn(`NATS does not answer (check NATS_URL): events wait in the outbox and consumers start once it does`);
  }, NATS_SILENCE_MS);
  timer.unref();
  bus.firstConnection().then(
    () => {
      clearTimeout(timer);
      if (away) logger.info('NATS answers: events flow again');
    },
    () => clearTimeout(timer),
  );
}

/**
 * Picks the bus adapter and wires the rest. Each part registers its close as it opens, so on
 * shutdown the retention clean-up stops, then the consumers, then the relay (handing the
 * outbox's last rows to the bus if it can), then the bus.
 */
export function composeEventBackbone(context: CompositionContext, database: Database): EventBackbone {
  const { config, logger, stack } = context;
  const events = config.events;
  const serviceName = config.tracing.serviceName;
  // SQLite has one writer, and a commit costs more than a write: writes arriving together share one.
  const groupCommit = database.dialect === 'sqlite' ? groupCommitOn(new GroupCommit(database.db)) : undefined;
  const transactions = groupCommit ?? eachInItsOwnTransaction;
  const bus = stack.use('event bus', openBus(events, database, groupCommit));
  if (bus instanceof NatsEventBus) sayWhileNatsIsAway(bus, logger);
  const { outbox, relay, metrics } = composeOutbox(context, database, bus, transactions);
  const retry = {
    attempts: events.handlerAttempts,
    backoffMs: events.retryBackoffMs,
    maxBackoffMs: events.retryMaxBackoffMs,
    // A consumer whose database is away (or locked past the busy timeout) waits for it rather than
    // dead-lettering what it could not store.
    transient: isDatabaseAway,
  };
  const runner = new ConsumerRunner(bus, retry, metrics, logger, serviceName);
  stack.defer('event consumers', () => runner.stop());
  const kyselyEventStore = new KyselyEventStore(database.db, transactions);
  const eventStore = config.tracing.enabled ? tracedEventStore(kyselyEventStore) : kyselyEventStore;
  const retention = eventRetention(context, database, eventStore);
  const deadLetters = new DeadLetterManager(
    { store: new KyselyDeadLetterStore(database.db), bus, metrics, tracing: otelMessageTracing(bus.system) },
    { maxRetries: events.dlqMaxRetries, retryDelayMs: events.dlqRetryDelayMs },
    serviceName,
  );

  return {
    bus,
    outbox,
    relay,
    eventStore,
    deadLetters,
    metrics,
    async backlog() {
      const { depth, oldestAgeSeconds } = await relay.backlog();
      return { outbox_depth: depth, outbox_oldest_age_seconds: oldestAgeSeconds };
    },
    async start(consumers, options) {
      relay.start();
      for (const consumer of consumers) await runner.start(consumer);
      if (options.prune) retention.start();
    },
  };
}
