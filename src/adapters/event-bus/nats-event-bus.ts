import {
  AckPolicy,
  connect,
  type ConsumerConfig,
  type ConsumerInfo,
  DeliverPolicy,
  ErrorCode,
  headers as natsHeaders,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  JSONCodec,
  type NatsConnection,
  nanos,
  NatsError,
  RetentionPolicy,
  StorageType,
} from 'nats';
import { type EventEnvelope, type MessageHeaders, partitionFor } from '../../domain/events.js';
import type {
  BusMessage,
  EventBus,
  PublishedPosition,
  OutgoingMessage,
  PublishOptions,
  PublishOutcome,
  SubscribeOptions,
  Subscription,
} from '../../ports/event-bus.js';
import { MessageRefused, outcomesOf } from './publish-outcomes.js';
import { InFlightWindow } from './in-flight-window.js';

export interface NatsEventBusOptions {
  readonly url: string;
  readonly partitions: number;
  /** How long a delivered message may stay unacknowledged before JetStream redelivers it. */
  readonly ackWaitMs: number;
  readonly retryDelayMs: number;
  /** Prefix of stream and subject names (tests use a unique one). */
  readonly prefix: string;
  readonly retentionMs: number;
  /** Window in which JetStream drops a repeated event id (Nats-Msg-Id). */
  readonly duplicateWindowMs: number;
}

const codec = JSONCodec<EventEnvelope>();
/** Consumer groups that only follow what comes next are forgotten by the server after this idle time. */
const LATEST_GROUP_IDLE_MS = 60 * 60 * 1000;
/**
 * How far the broker's clock may be behind this process's: a group that follows only what comes
 * next, whose consumer is made after it subscribed, starts this much earlier than the moment it
 * last knew it was following (a few messages twice rather than one missed).
 */
const CLOCK_SKEW_MS = 1000;

/**
 * The distributed event bus: one JetStream stream per topic, one subject per partition, and per
 * consumer group one durable pull consumer per partition with explicit acks and one message in
 * flight, so order holds within a partition while members of the group share the partitions.
 * Uses only features of nats-server 2.9.
 */
interface Connection {
  readonly nc: NatsConnection;
  readonly jsm: JetStreamManager;
  readonly js: JetStreamClient;
}

/** How long a publish waits for a broker that is not (yet) connected before it fails. */
const PUBLISH_WAIT_MS = 2000;
/** How long a consumer loop waits for the broker before it looks again whether it should stop. */
const CONSUMER_WAIT_MS = 1000;
/** Messages an unordered group (SubscribeOptions.ordered false) takes, and has in flight, at once. */
const UNORDERED_BATCH = 100;

/**
 * What a partition's consumer of a group with `concurrency` may have unacknowledged, over all
 * members (each member's own window bounds what it takes).
 */
const WINDOWED_MAX_ACK_PENDING = 1000;

/** Ordered groups have one message in flight per partition, so order holds; unordered ones a batch. */
const maxAckPending = (options: SubscribeOptions) =>
  options.concurrency !== undefined ? WINDOWED_MAX_ACK_PENDING : options.ordered === false ? UNORDERED_BATCH : 1;

export class NatsEventBus implements EventBus {
  readonly partitions: number;
  readonly system = 'nats';
  private readonly streams = new Map<string, Promise<void>>();
  private readonly subscriptions = new Set<Subscription>();
  private readonly connecting: Promise<Connection>;
  private connection: Connection | undefined;
  private closed = false;

  private constructor(private readonly options: NatsEventBusOptions) {
    this.partitions = options.partitions;
    this.connecting = connect({
      servers: options.url.replace(/^nats:\/\//, ''),
      name: 'urlshortener',
      waitOnFirstConnect: true, // a broker that is down at start-up is retried, not fatal
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
    }).then(async (nc) => {
      if (this.closed) {
        await nc.close();
        throw new Error('NATS event bus closed');
      }
      this.connection = { nc, jsm: await nc.jetstreamManager(), js: nc.jetstream() };
      return this.connection;
    });
    this.connecting.catch(() => undefined);
  }

  /**
   * Starts connecting in the background and returns at once: the service starts (and serves
   * redirects) while the broker is away; publishes fail fast until it answers, so the outbox
   * keeps the events, and consumers start once it does.
   */
  static open(options: NatsEventBusOptions): NatsEventBus {
    return new NatsEventBus(options);
  }

  /** Resolves once the first connection is made (never, while the broker stays away). */
  firstConnection(): Promise<void> {
    return this.connecting.then(() => undefined);
  }

  /** Opens the bus and waits for the first connection. */
  static async connect(options: NatsEventBusOptions): Promise<NatsEventBus> {
    const bus = new NatsEventBus(options);
    await bus.connected();
    return bus;
  }

  /** The live connection; waits for the first one at most `waitMs` when given. */
  private connected(waitMs?: number): Promise<Connection> {
    if (this.connection) return Promise.resolve(this.connection);
    if (waitMs === undefined) return this.connecting;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('NATS is not connected')), waitMs);
      this.connecting.then(resolve, reject).finally(() => clearTimeout(timer));
    });
  }

  async publish(
    topic: string,
    key: string,
    headers: MessageHeaders,
    envelope: EventEnvelope,
    options: PublishOptions = {},
  ): Promise<PublishedPosition> {
    const { js, nc } = await this.connected(PUBLISH_WAIT_MS);
    await this.ensureStream(topic);
    const partition = options.partition ?? partitionFor(key, this.partitions);
    let data: Uint8Array | undefined;
    try {
      data = codec.encode(envelope);
      const h = natsHeaders();
      for (const [name, value] of Object.entries(headers)) h.set(name, value);
      const ack = await js.publish(this.subject(topic, partition), data, {
        msgID: options.messageId ?? envelope.event_id,
        headers: h,
      });
      return { partition, offset: ack.seq };
    } catch (error) {
      throw refusal(error, data?.length, nc.info?.max_payload) ?? error;
    }
  }

  /**
   * The publishes go out together, in order, and their acknowledgements are awaited together;
   * each message's outcome is its own.
   */
  publishAll(messages: readonly OutgoingMessage[]): Promise<PublishOutcome[]> {
    return outcomesOf(messages.map((m) => this.publish(m.topic, m.key, m.headers, m.envelope)));
  }

  async subscribe(options: SubscribeOptions): Promise<Subscription> {
    const window = options.concurrency === undefined ? undefined : new InFlightWindow(options.concurrency);
    const state = { running: true, window };
    const partitions = Array.from({ length: this.partitions }, (_, p) => p);
    // Connected: create the consumers now, so what is published from here on is theirs. Not
    // connected: each loop creates its consumer once the broker answers.
    if (this.connection) {
      await this.ensureStream(options.topic);
      for (const p of partitions) await this.ensureConsumer(options, p);
    }
    // Until when each partition's consumer is known to have been there: a consumer made later
    // (the broker answered only after this call, or forgot the consumer) starts from that moment,
    // so that a group that follows what comes next misses nothing published since it subscribed.
    const subscribedAt = Date.now();
    const loops = partitions.map((p) => this.consume(options, p, state, subscribedAt));
    const subscription: Subscription = {
      close: async () => {
        state.running = false;
        this.subscriptions.delete(subscription);
        await Promise.all([...loops, window?.close()]);
      },
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  async seek(group: string, topic: string, partition: number, offset: number): Promise<void> {
    const { jsm } = await this.connected();
    await this.ensureStream(topic);
    const stream = this.stream(topic);
    const durable = this.durable(group, partition);
    await jsm.consumers.delete(stream, durable).catch(() => undefined);
    await jsm.consumers.add(stream, {
      ...this.consumerConfig(topic, partition, durable, this.options.ackWaitMs),
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: Math.max(1, offset),
    });
  }

  async ping(): Promise<void> {
    const { nc } = await this.connected(CONSUMER_WAIT_MS);
    await nc.flush();
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    const nc = this.connection?.nc;
    if (nc && !nc.isClosed()) await nc.drain();
  }

  /** Deletes the streams under this bus's prefix (tests). */
  async destroy(): Promise<void> {
    const { jsm } = await this.connected();
    for (const topic of this.streams.keys()) await jsm.streams.delete(this.stream(topic)).catch(() => undefined);
  }

  private stream(topic: string): string {
    return `${this.options.prefix}${topic}`;
  }

  private subject(topic: string, partition: number): string {
    return `${this.options.prefix}${topic}.${partition}`;
  }

  private durable(group: string, partition: number): string {
    return `${group.replace(/[^A-Za-z0-9_-]/g, '_')}-p${partition}`;
  }

  private ensureStream(topic: string): Promise<void> {
    let ready = this.streams.get(topic);
    if (!ready) {
      const name = this.stream(topic);
      const { jsm } = this.connection!;
      ready = jsm.streams
        .info(name)
        .then(() => undefined)
        .catch(async () => {
          await jsm.streams.add({
            name,
            subjects: [`${name}.*`],
            storage: StorageType.File,
            retention: RetentionPolicy.Limits,
            max_age: nanos(this.options.retentionMs),
            duplicate_window: nanos(this.options.duplicateWindowMs),
          });
        });
      ready.catch(() => this.streams.delete(topic));
      this.streams.set(topic, ready);
    }
    return ready;
  }

  private consumerConfig(
    topic: string,
    partition: number,
    durable: string,
    ackWaitMs: number,
    maxAckPending = 1,
  ): Partial<ConsumerConfig> {
    return {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      filter_subject: this.subject(topic, partition),
      max_ack_pending: maxAckPending,
      ack_wait: nanos(ackWaitMs),
      max_deliver: -1,
    };
  }

  /**
   * The group's consumer of `partition`, made if it is not there: from the start of the stream, or
   * for a group that follows what comes next, from now (`since` absent) or from `since`.
   */
  private async ensureConsumer(options: SubscribeOptions, partition: number, since?: number): Promise<string> {
    const stream = this.stream(options.topic);
    const durable = this.durable(options.group, partition);
    const { jsm } = await this.connected();
    let info: ConsumerInfo | undefined;
    try {
      info = await jsm.consumers.info(stream, durable);
    } catch {
      info = undefined;
    }
    const ackWaitMs = options.ackWaitMs ?? this.options.ackWaitMs;
    if (info !== undefined) {
      // A group whose settings changed since its consumer was made: how many may be in flight, and for how long.
      const ackWait = nanos(ackWaitMs);
      if (info.config.max_ack_pending !== maxAckPending(options) || info.config.ack_wait !== ackWait) {
        await jsm.consumers.update(stream, durable, { max_ack_pending: maxAckPending(options), ack_wait: ackWait });
      }
    } else {
      const latest = options.startAt === 'latest';
      const start = !latest
        ? { deliver_policy: DeliverPolicy.All }
        : since === undefined
          ? { deliver_policy: DeliverPolicy.New }
          : {
              deliver_policy: DeliverPolicy.StartTime,
              opt_start_time: new Date(since - CLOCK_SKEW_MS).toISOString(),
            };
      await jsm.consumers.add(stream, {
        ...this.consumerConfig(options.topic, partition, durable, ackWaitMs, maxAckPending(options)),
        ...start,
        ...(latest ? { inactive_threshold: nanos(LATEST_GROUP_IDLE_MS) } : {}),
      });
    }
    return durable;
  }

  private async consume(
    options: SubscribeOptions,
    partition: number,
    state: { running: boolean; window: InFlightWindow | undefined },
    subscribedAt: number,
  ): Promise<void> {
    const stream = this.stream(options.topic);
    let followedAt = subscribedAt;
    while (state.running) {
      try {
        const { js } = await this.connected(CONSUMER_WAIT_MS);
        await this.ensureStream(options.topic);
        const durable = await this.ensureConsumer(options, partition, followedAt);
        const consumer = await js.consumers.get(stream, durable);
        while (state.running) {
          // A pull the broker answered: the consumer was there, and holds what came since.
          const pulledAt = Date.now();
          if (state.window) {
            // A message as soon as the window has room; handled alongside those in flight.
            if (!(await state.window.acquire())) break;
            const message = await consumer.next({ expires: CONSUMER_WAIT_MS }).catch((error: unknown) => {
              state.window?.release();
              throw error;
            });
            if (message) state.window.start(() => this.deliver(options, message));
            else state.window.release();
          } else if (options.ordered === false) {
            // A batch at a time, handled all at once; each message is acknowledged on its own.
            const batch = await consumer.fetch({ max_messages: UNORDERED_BATCH, expires: CONSUMER_WAIT_MS });
            const handled: Promise<void>[] = [];
            for await (const message of batch) handled.push(this.deliver(options, message));
            await Promise.all(handled);
          } else {
            const message = await consumer.next({ expires: CONSUMER_WAIT_MS });
            if (message) await this.deliver(options, message);
          }
          followedAt = pulledAt;
        }
      } catch {
        // Disconnected, or the consumer was replaced (seek): get it again after a pause.
        if (state.running) await sleep(this.options.retryDelayMs);
      }
    }
  }

  private async deliver(options: SubscribeOptions, message: JsMsg): Promise<void> {
    const headers: Record<string, string> = {};
    // The event's own headers only: JetStream's (`Nats-Msg-Id`, …) are transport details that must
    // not travel on when a consumer forwards the headers (dead-lettering keeps the original ones).
    for (const name of message.headers?.keys() ?? []) {
      if (!/^nats-/i.test(name)) headers[name] = message.headers?.get(name) ?? '';
    }
    const busMessage: BusMessage = {
      topic: options.topic,
      partition: Number(message.subject.slice(message.subject.lastIndexOf('.') + 1)),
      offset: message.info.streamSequence,
      headers,
      envelope: codec.decode(message.data),
      deliveryCount: message.info.redeliveryCount,
      inProgress: () => {
        try {
          message.working();
        } catch {
          // Disconnected: the ack wait runs out and the message goes to another member, as it must.
        }
      },
    };
    try {
      await options.handler(busMessage);
      message.ack();
    } catch {
      message.nak(this.options.retryDelayMs);
    }
  }
}

/** Client errors that no retry can cure: the message is larger than the server takes, or not encodable. */
const REFUSING_CODES: ReadonlySet<string> = new Set([
  ErrorCode.MaxPayloadExceeded,
  ErrorCode.BadJson,
  ErrorCode.BadPayload,
  ErrorCode.BadHeader,
  ErrorCode.InvalidPayload,
]);
/** JetStream's answer to a message larger than the stream's `max_msg_size`. */
const MESSAGE_TOO_LARGE_FOR_STREAM = 10054;

/** A MessageRefused for an error that says the broker will never take this message; else undefined. */
function refusal(
  error: unknown,
  bytes: number | undefined,
  maxPayload: number | undefined,
): MessageRefused | undefined {
  if (!(error instanceof NatsError)) return undefined;
  if (!REFUSING_CODES.has(error.code) && error.api_error?.err_code !== MESSAGE_TOO_LARGE_FOR_STREAM) return undefined;
  const size =
    error.code === ErrorCode.MaxPayloadExceeded && bytes !== undefined
      ? ` (a payload of ${bytes} bytes plus headers; the server's max_payload is ${maxPayload ?? 'unknown'})`
      : '';
  return new MessageRefused(`NATS refuses the message: ${error.message}${size}`, error);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
