import { randomFillSync } from 'node:crypto';

/** Topics and the event types they carry (design "Events"). */
export const TOPICS = {
  url: 'url_events',
  execution: 'execution_events',
  notification: 'notification_events',
  deadLetter: 'dead_letter_queue',
} as const;
export type Topic = (typeof TOPICS)[keyof typeof TOPICS];

export const EVENT_TYPES = {
  urlCreated: 'url.created',
  urlUpdated: 'url.updated',
  urlDeleted: 'url.deleted',
  urlClicked: 'url.clicked',
  urlExpired: 'url.expired',
  executionRequested: 'execution.requested',
  executionStarted: 'execution.started',
  executionCompleted: 'execution.completed',
  executionFailed: 'execution.failed',
  executionTimedOut: 'execution.timed_out',
  deadLettered: 'dead_letter',
} as const;

/** The serialized event: small, versioned, self-describing. */
export interface EventEnvelope<P = unknown> {
  readonly event_id: string;
  readonly event_type: string;
  readonly event_version: number;
  readonly occurred_at: string;
  readonly service: string;
  readonly payload: P;
}

/** An event on its way to the bus: the envelope plus where it goes and what orders it. */
export interface OutgoingEvent<P = unknown> {
  readonly topic: string;
  /** Events with the same key land in the same partition, so they stay in order. */
  readonly key: string;
  readonly envelope: EventEnvelope<P>;
}

/**
 * The events describing a change, built from what was written. They are recorded in the same
 * transaction as the change: a change that committed always has its events.
 */
export type EventsFor<T> = (written: T) => readonly OutgoingEvent[];

/** The message headers of spec §6.1 (plus nothing else). */
export type MessageHeaders = Readonly<Record<string, string>>;

let lastMs = 0;
let sequence = 0;

/** Random bytes drawn from the system in blocks: one system call per 256 identifiers, not one each. */
const entropy = Buffer.alloc(16 * 256);
let entropyUsed = entropy.length;

function randomBlock(): Buffer {
  if (entropyUsed === entropy.length) {
    randomFillSync(entropy);
    entropyUsed = 0;
  }
  const block = entropy.subarray(entropyUsed, entropyUsed + 16);
  entropyUsed += 16;
  return block;
}

/** A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then a counter and randomness; sorts by time. */
export function uuidv7(now = Date.now()): string {
  const bytes = Buffer.from(randomBlock());
  // Monotonic within a process: the same millisecond bumps a 12-bit counter.
  if (now <= lastMs) {
    sequence = (sequence + 1) & 0xfff;
    if (sequence === 0) lastMs += 1;
    now = lastMs;
  } else {
    lastMs = now;
    sequence = bytes.readUInt16BE(0) & 0x7ff;
  }
  bytes.writeUIntBE(now, 0, 6);
  bytes[6] = 0x70 | (sequence >> 8);
  bytes[7] = sequence & 0xff;
  bytes[8] = 0x80 | (bytes[8]! & 0x3f);
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export function createEvent<P>(
  type: string,
  payload: P,
  options: { service: string; topic: string; key: string; version?: number; now?: Date },
): OutgoingEvent<P> {
  const now = options.now ?? new Date();
  return {
    topic: options.topic,
    key: options.key,
    envelope: {
      event_id: uuidv7(now.getTime()),
      event_type: type,
      event_version: options.version ?? 1,
      occurred_at: now.toISOString(),
      service: options.service,
      payload,
    },
  };
}

/** The partition of `key` among `partitions`: a stable FNV-1a hash. */
export function partitionFor(key: string, partitions: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % partitions;
}

/** The execution an event belongs to, when its payload names one. */
export function executionIdOf(envelope: EventEnvelope): string | null {
  const payload = envelope.payload as { execution_id?: unknown } | null;
  return typeof payload?.execution_id === 'string' ? payload.execution_id : null;
}
