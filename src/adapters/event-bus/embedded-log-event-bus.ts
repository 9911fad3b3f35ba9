import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Kysely } from 'kysely';
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
import { isUniqueViolation, type AnyKysely } from '../storage/database.js';
import { PreparedQuery } from '../storage/prepared-query.js';
import type { TransactionalLog, TransactionRunner } from './outbox.js';
import type { EventTables } from '../storage/schema.js';
import { failure, isPermanent, MessageRefused } from './publish-outcomes.js';
import { InFlightWindow } from './in-flight-window.js';
import { deliverWindowed, type PartitionAccess } from './windowed-partition.js';

export interface EmbeddedLogOptions {
  readonly partitions: number;
  /** How long a member holds a partition without renewing; a crashed member's work moves after this. */
  readonly leaseMs: number;
  /** How often to look for messages published by other processes (this process's wake us at once). */
  readonly pollMs: number;
  /** Delay before a message whose handler failed is delivered again. */
  readonly retryDelayMs: number;
  readonly batchSize: number;
  readonly clock?: () => number;
  /** How a group's position commit runs (SQLite: in the group commit of the service's writes); alone by default. */
  readonly transactions?: TransactionRunner;
}

type Row = EventTables['event_log'];
/** A log entry, with its headers and envelope as objects when this process wrote it (no parsing them back). */
type Entry = Row & { readonly decoded?: { readonly headers: MessageHeaders; readonly envelope: EventEnvelope } };

/** The statements of every append, built once (appends are on the write path of every change). */
function logStatements(db: Kysely<EventTables>) {
  return {
    takeOffset: new PreparedQuery(db, (db, p) =>
      db
        .updateTable('event_partitions')
        .set((eb) => ({ next_offset: eb('next_offset', '+', 1) }))
        .where('topic', '=', p('topic'))
        .where('partition_no', '=', p('partition'))
        .returning('next_offset'),
    ),
    advanceOffset: new PreparedQuery(db, (db, p) =>
      db
        .updateTable('event_partitions')
        .set({ next_offset: p('next') })
        .where('topic', '=', p('topic'))
        .where('partition_no', '=', p('partition'))
        .where('next_offset', '=', p('expected')),
    ),
    createPartition: new PreparedQuery(db, (db, p) =>
      db
        .insertInto('event_partitions')
        .values({ topic: p('topic'), partition_no: p('partition'), next_offset: 0 })
        .onConflict((oc) => oc.columns(['topic', 'partition_no']).doNothing()),
    ),
    commitPosition: new PreparedQuery(db, (db, p) =>
      db
        .updateTable('consumer_offsets')
        .set({ next_offset: p('next_offset') })
        .where('group_name', '=', p('group_name'))
        .where('topic', '=', p('topic'))
        .where('partition_no', '=', p('partition')),
    ),
    insertEntry: new PreparedQuery<EventTables, unknown, Row>(db, (db, p) =>
      db.insertInto('event_log').values({
        topic: p('topic'),
        partition_no: p('partition_no'),
        log_offset: p('log_offset'),
        message_id: p('message_id'),
        headers: p('headers'),
        envelope: p('envelope'),
        created_at: p('created_at'),
      }),
    ),
  };
}
type LogStatements = ReturnType<typeof logStatements>;

/** One partition of one topic, as a map key. */
const partitionKey = (topic: string, partition: number) => `${topic}\u0000${partition}`;

const positionOf = (entry: Row): PublishedPosition => ({ partition: entry.partition_no, offset: entry.log_offset });

/**
 * Entries kept per partition for this process's consumers: enough for a consumer's linger under
 * load; kept short-lived, so they die young instead of filling the old generation.
 */
const RECENT_PER_PARTITION = 256;

/**
 * The entries this process committed lately, per partition, in a contiguous run of offsets, so
 * that its own consumers take them from memory instead of reading them back. Only committed
 * entries enter, at their offsets; an entry that does not follow the run (another process wrote
 * the ones between) starts a new run. A read answers only from a run that holds the offset asked
 * for, so it returns exactly what the table holds there, and anything else is read from the table.
 */
class RecentEntries {
  private readonly runs = new Map<string, { first: number; entries: Entry[] }>();

  add(entry: Entry): void {
    const key = partitionKey(entry.topic, entry.partition_no);
    let run = this.runs.get(key);
    if (run === undefined || run.first + run.entries.length !== entry.log_offset) {
      run = { first: entry.log_offset, entries: [] };
      this.runs.set(key, run);
    }
    run.entries.push(entry);
    if (run.entries.length > RECENT_PER_PARTITION) {
      const excess = run.entries.length - RECENT_PER_PARTITION / 2;
      run.entries.splice(0, excess);
      run.first += excess;
    }
  }

  /**
   * Up to `limit` entries from offset `from` on, or none when `from` is not in memory; `atEnd`
   * when `from` is just past the last entry this process wrote there (nothing newer from here).
   */
  read(topic: string, partition: number, from: number, limit: number): { entries: Entry[]; atEnd: boolean } {
    const run = this.runs.get(partitionKey(topic, partition));
    const end = run === undefined ? -1 : run.first + run.entries.length;
    if (run === undefined || from < run.first || from >= end) return { entries: [], atEnd: from === end };
    return { entries: run.entries.slice(from - run.first, from - run.first + limit), atEnd: false };
  }
}

/**
 * How long a consumer woken by a publish waits for more before it reads: under load, one read
 * and one position commit then cover a few hundred messages instead of a handful.
 */
const WAKE_LINGER_MS = 20;

/**
 * The embedded event bus: a partitioned log in the service's own database. Consumer groups share
 * the partitions through leases, so several processes on one PostgreSQL database also work;
 * a group's position is committed after each handled message (at least once).
 */
export class EmbeddedLogEventBus implements EventBus, TransactionalLog {
  readonly partitions: number;
  private readonly db: Kysely<EventTables>;
  private readonly statements: LogStatements;
  private readonly recent = new RecentEntries();
  /** Per partition, the next offset as this process last saw it (see takeOffset). */
  private readonly expectedOffsets = new Map<string, number>();
  private readonly wake = new EventEmitter();
  private readonly subscriptions = new Set<Subscription>();
  private readonly now: () => number;

  constructor(
    db: AnyKysely,
    private readonly options: EmbeddedLogOptions,
  ) {
    this.db = db as Kysely<EventTables>;
    this.partitions = options.partitions;
    this.statements = logStatements(this.db);
    this.now = options.clock ?? Date.now;
    this.wake.setMaxListeners(0);
  }

  async publish(
    topic: string,
    key: string,
    headers: MessageHeaders,
    envelope: EventEnvelope,
    options: PublishOptions = {},
  ): Promise<PublishedPosition> {
    let entry: Row;
    try {
      entry = await this.db.transaction().execute((trx) => this.append(trx, topic, key, headers, envelope, options));
    } catch (error) {
      // The same message published twice: the other insert won, which is the point.
      const messageId = options.messageId ?? envelope.event_id;
      const existing = isUniqueViolation(error) ? await this.positionOf(messageId, this.db) : undefined;
      if (!existing) throw error;
      this.wake.emit(topic);
      return existing;
    }
    this.committed([entry]);
    return positionOf(entry);
  }

  /** Appends one message to its partition inside `trx`; a repeated message id fails the unique insert. */
  private async append(
    trx: Kysely<EventTables>,
    topic: string,
    key: string,
    headers: MessageHeaders,
    envelope: EventEnvelope,
    options: PublishOptions,
  ): Promise<Row> {
    const partition = options.partition ?? partitionFor(key, this.partitions);
    return this.appendEntry(trx, topic, partition, options.messageId ?? envelope.event_id, headers, envelope);
  }

  private async appendEntry(
    trx: Kysely<EventTables>,
    topic: string,
    partition: number,
    messageId: string,
    headers: MessageHeaders,
    envelope: EventEnvelope,
  ): Promise<Entry> {
    let encoded: { headers: string; envelope: string };
    try {
      encoded = { headers: JSON.stringify(headers), envelope: JSON.stringify(envelope) };
    } catch (error) {
      throw new MessageRefused(`the message cannot be encoded as JSON: ${(error as Error).message}`, error);
    }
    const offset = await this.takeOffset(trx, topic, partition);
    const entry: Row = {
      topic,
      partition_no: partition,
      log_offset: offset,
      message_id: messageId,
      ...encoded,
      created_at: this.now(),
    };
    await this.statements.insertEntry.run(trx, entry);
    // Delivered as they are to every group of this process: frozen, so no handler changes another's.
    return { ...entry, decoded: { headers: deepFreeze(headers), envelope: deepFreeze(envelope) } };
  }

  /**
   * The partition's next offset, taken inside `trx`. The offset this process expects is tried
   * first, with the counter's value as a condition (cheaper than reading the counter back); when
   * another process appended meanwhile, or a transaction that took one was rolled back, the
   * condition fails and the counter is read back instead. Only the condition decides: the
   * expectation is a hint, never trusted.
   */
  private async takeOffset(trx: Kysely<EventTables>, topic: string, partition: number): Promise<number> {
    const key = partitionKey(topic, partition);
    const expected = this.expectedOffsets.get(key);
    let offset: number;
    if (
      expected !== undefined &&
      (await this.statements.advanceOffset.run(trx, { topic, partition, expected, next: expected + 1 }))
        .numAffectedRows === 1n
    ) {
      offset = expected;
    } else {
      const at = { topic, partition };
      let [row] = (await this.statements.takeOffset.run(trx, at)).rows;
      if (row === undefined) {
        // The partition's first message ever: its counter row, then the same again.
        await this.statements.createPartition.run(trx, at);
        [row] = (await this.statements.takeOffset.run(trx, at)).rows;
      }
      offset = Number(row!.next_offset) - 1;
    }
    this.expectedOffsets.set(key, offset + 1);
    return offset;
  }

  /**
   * The outbox's way in (TransactionalLog): appends inside the caller's transaction, so the
   * change and its events commit together. Partitions are taken in order, so two transactions
   * never wait for each other's partitions in opposite orders (PostgreSQL row locks).
   */
  async appendInTransaction(trx: AnyKysely, messages: readonly OutgoingMessage[]): Promise<() => void> {
    const placed = messages.map((message) => ({ message, partition: partitionFor(message.key, this.partitions) }));
    // Stable: messages of one partition keep their order.
    placed.sort((a, b) =>
      a.message.topic === b.message.topic ? a.partition - b.partition : a.message.topic < b.message.topic ? -1 : 1,
    );
    const entries: Row[] = [];
    for (const { message, partition } of placed) {
      const { topic, headers, envelope } = message;
      entries.push(
        await this.appendEntry(trx as Kysely<EventTables>, topic, partition, envelope.event_id, headers, envelope),
      );
    }
    return () => this.committed(entries);
  }

  /** After the transaction that wrote `entries` committed: keep them for this process's consumers, and wake those. */
  private committed(entries: readonly Row[]): void {
    for (const entry of entries) this.recent.add(entry);
    for (const topic of new Set(entries.map((e) => e.topic))) this.wake.emit(topic);
  }

  async publishAll(messages: readonly OutgoingMessage[]): Promise<PublishOutcome[]> {
    if (messages.length === 0) return [];
    let entries: Row[];
    try {
      // One transaction for the batch: one commit instead of one per message.
      entries = await this.db.transaction().execute(async (trx) => {
        const written: Row[] = [];
        for (const m of messages) written.push(await this.append(trx, m.topic, m.key, m.headers, m.envelope, {}));
        return written;
      });
    } catch (error) {
      if (!isUniqueViolation(error) && !isPermanent(error)) return messages.map(() => failure(error));
      // A message of the batch was there already, or cannot be taken: one by one, each answering for itself.
      const outcomes: PublishOutcome[] = [];
      for (const m of messages) {
        outcomes.push(
          await this.publish(m.topic, m.key, m.headers, m.envelope).then((position) => ({ position }), failure),
        );
      }
      return outcomes;
    }
    this.committed(entries);
    return entries.map((entry) => ({ position: positionOf(entry) }));
  }

  async subscribe(options: SubscribeOptions): Promise<Subscription> {
    const consumer = new GroupConsumer(
      this.db,
      this.wake,
      this.recent,
      this.statements,
      this.options,
      this.now,
      options,
    );
    await consumer.start();
    const subscription: Subscription = {
      close: async () => {
        this.subscriptions.delete(subscription);
        await consumer.close();
      },
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  async seek(group: string, topic: string, partition: number, offset: number): Promise<void> {
    await this.db
      .insertInto('consumer_offsets')
      .values({ group_name: group, topic, partition_no: partition, next_offset: offset })
      .onConflict((oc) => oc.columns(['group_name', 'topic', 'partition_no']).doUpdateSet({ next_offset: offset }))
      .execute();
  }

  async ping(): Promise<void> {
    await this.db.selectFrom('event_partitions').select('topic').limit(1).execute();
  }

  async close(): Promise<void> {
    await Promise.all([...this.subscriptions].map((s) => s.close()));
  }

  private async positionOf(messageId: string, db: Kysely<EventTables>): Promise<PublishedPosition | undefined> {
    const row = await db
      .selectFrom('event_log')
      .select(['partition_no', 'log_offset'])
      .where('message_id', '=', messageId)
      .executeTakeFirst();
    return row && { partition: row.partition_no, offset: Number(row.log_offset) };
  }
}

/** One member of a consumer group: holds a fair share of the partitions and works each in order. */
class GroupConsumer {
  private readonly member = randomUUID();
  private readonly owned = new Set<number>();
  private readonly workers = new Map<number, Promise<void>>();
  /** Failed deliveries so far, by offset × 65,536 + partition. */
  private readonly failures = new Map<number, number>();
  /** When each partition was last read from the table. */
  private readonly tableReads = new Map<number, number>();
  private running = true;
  private timer: NodeJS.Timeout | undefined;
  private rebalancing: Promise<void> | undefined;
  /** With SubscribeOptions.concurrency: the places in flight, shared by this member's partitions. */
  private readonly window: InFlightWindow | undefined;

  constructor(
    private readonly db: Kysely<EventTables>,
    private readonly wake: EventEmitter,
    private readonly recent: RecentEntries,
    private readonly statements: LogStatements,
    private readonly options: EmbeddedLogOptions,
    private readonly now: () => number,
    private readonly subscription: SubscribeOptions,
  ) {
    if (subscription.concurrency !== undefined) this.window = new InFlightWindow(subscription.concurrency);
  }

  /** The group's own ack wait, when it has one, is its lease: a dead member's work moves on after it. */
  private get leaseMs(): number {
    return this.subscription.ackWaitMs ?? this.options.leaseMs;
  }

  private get key() {
    return { group_name: this.subscription.group, topic: this.subscription.topic };
  }

  async start(): Promise<void> {
    const partitions = Array.from({ length: this.options.partitions }, (_, p) => p);
    const ends = new Map<number, number>();
    if (this.subscription.startAt === 'latest') {
      const rows = await this.db
        .selectFrom('event_partitions')
        .select(['partition_no', 'next_offset'])
        .where('topic', '=', this.key.topic)
        .execute();
      for (const row of rows) ends.set(row.partition_no, Number(row.next_offset));
    }
    await this.db
      .insertInto('consumer_offsets')
      .values(partitions.map((p) => ({ ...this.key, partition_no: p, next_offset: ends.get(p) ?? 0 })))
      .onConflict((oc) => oc.columns(['group_name', 'topic', 'partition_no']).doNothing())
      .execute();
    await this.db
      .insertInto('consumer_leases')
      .values(partitions.map((p) => ({ ...this.key, partition_no: p, owner: '', expires_at: 0 })))
      .onConflict((oc) => oc.columns(['group_name', 'topic', 'partition_no']).doNothing())
      .execute();
    await this.rebalance();
    this.timer = setInterval(() => void this.rebalance(), Math.max(50, Math.floor(this.leaseMs / 3)));
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.running = false;
    if (this.timer) clearInterval(this.timer);
    this.wake.emit(this.subscription.topic);
    await this.rebalancing;
    await Promise.all([...this.workers.values(), this.window?.close()]);
    await this.db
      .updateTable('consumer_leases')
      .set({ owner: '', expires_at: 0 })
      .where('group_name', '=', this.key.group_name)
      .where('topic', '=', this.key.topic)
      .where('owner', '=', this.member)
      .execute();
    await this.db
      .deleteFrom('consumer_members')
      .where('group_name', '=', this.key.group_name)
      .where('topic', '=', this.key.topic)
      .where('member', '=', this.member)
      .execute();
  }

  /** Renews this member's leases and takes or gives back partitions towards a fair share. */
  private rebalance(): Promise<void> {
    this.rebalancing ??= this.doRebalance()
      .catch(() => undefined) // a failed round is retried at the next tick; the leases bound the damage
      .finally(() => (this.rebalancing = undefined));
    return this.rebalancing;
  }

  private async doRebalance(): Promise<void> {
    if (!this.running) return;
    const now = this.now();
    const until = now + this.leaseMs;
    const { group_name, topic } = this.key;
    await this.db
      .insertInto('consumer_members')
      .values({ group_name, topic, member: this.member, expires_at: until })
      .onConflict((oc) => oc.columns(['group_name', 'topic', 'member']).doUpdateSet({ expires_at: until }))
      .execute();
    const live = await this.db
      .selectFrom('consumer_members')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('group_name', '=', group_name)
      .where('topic', '=', topic)
      .where('expires_at', '>', now)
      .executeTakeFirstOrThrow();
    const share = Math.ceil(this.options.partitions / Math.max(1, Number(live.n)));

    await this.db
      .updateTable('consumer_leases')
      .set({ expires_at: until })
      .where('group_name', '=', group_name)
      .where('topic', '=', topic)
      .where('owner', '=', this.member)
      .where('expires_at', '>', now)
      .execute();
    const leases = await this.db
      .selectFrom('consumer_leases')
      .select(['partition_no', 'owner', 'expires_at'])
      .where('group_name', '=', group_name)
      .where('topic', '=', topic)
      .orderBy('partition_no')
      .execute();
    const mine = leases.filter((l) => l.owner === this.member && Number(l.expires_at) > now).map((l) => l.partition_no);

    for (const p of mine.slice(share)) {
      await this.db
        .updateTable('consumer_leases')
        .set({ owner: '', expires_at: 0 })
        .where('group_name', '=', group_name)
        .where('topic', '=', topic)
        .where('partition_no', '=', p)
        .where('owner', '=', this.member)
        .execute();
    }
    const kept = mine.slice(0, share);
    for (const lease of leases) {
      if (kept.length >= share) break;
      if (Number(lease.expires_at) > now) continue;
      const claimed = await this.db
        .updateTable('consumer_leases')
        .set({ owner: this.member, expires_at: until })
        .where('group_name', '=', group_name)
        .where('topic', '=', topic)
        .where('partition_no', '=', lease.partition_no)
        .where('expires_at', '<=', now)
        .executeTakeFirst();
      if (Number(claimed.numUpdatedRows) === 1) kept.push(lease.partition_no);
    }

    this.owned.clear();
    for (const p of kept) this.owned.add(p);
    for (const p of kept) {
      if (this.running && !this.workers.has(p)) {
        this.workers.set(
          p,
          this.work(p).finally(() => this.workers.delete(p)),
        );
      }
    }
  }

  /** Delivers partition `p` in order (or windowed) while this member holds it. */
  private async work(p: number): Promise<void> {
    if (this.window) return deliverWindowed(this.partitionAccess(p), this.window);
    const { group_name, topic } = this.key;
    let next: number | undefined;
    while (this.running && this.owned.has(p)) {
      try {
        next ??= Number(
          (
            await this.db
              .selectFrom('consumer_offsets')
              .select('next_offset')
              .where('group_name', '=', group_name)
              .where('topic', '=', topic)
              .where('partition_no', '=', p)
              .executeTakeFirstOrThrow()
          ).next_offset,
        );
        const rows = await this.read(p, next);
        if (rows.length === 0) {
          await this.idle();
          continue;
        }
        // Handle the batch; commit the position once for what was handled.
        const from = next;
        const handled = await this.deliverAll(p, rows);
        if (handled > 0) next = Number(rows[handled - 1]!.log_offset) + 1;
        const failed = handled < rows.length && this.running && this.owned.has(p);
        if (next > from) {
          const position = { group_name, topic, partition: p, next_offset: next };
          const commit = (db: Kysely<EventTables>) => this.statements.commitPosition.run(db, position);
          await (this.options.transactions ? this.options.transactions(this.db, commit) : commit(this.db));
        }
        if (failed) {
          next = undefined; // read the committed position again, then retry the message that failed
          await sleep(this.options.retryDelayMs);
        }
      } catch {
        next = undefined;
        await sleep(this.options.retryDelayMs); // the database is away: try again shortly
      }
    }
  }

  private async position(p: number): Promise<number> {
    const row = await this.db
      .selectFrom('consumer_offsets')
      .select('next_offset')
      .where('group_name', '=', this.key.group_name)
      .where('topic', '=', this.key.topic)
      .where('partition_no', '=', p)
      .executeTakeFirstOrThrow();
    return Number(row.next_offset);
  }

  private partitionAccess(p: number): PartitionAccess<Row> {
    return {
      position: () => this.position(p),
      read: (offset) => this.read(p, offset),
      offsetOf: (row) => Number(row.log_offset),
      deliver: (row) => this.deliver(row),
      commit: async (next) => {
        const position = { ...this.key, partition: p, next_offset: next };
        const commit = (db: Kysely<EventTables>) => this.statements.commitPosition.run(db, position);
        await (this.options.transactions ? this.options.transactions(this.db, commit) : commit(this.db));
      },
      idle: () => this.idle(),
      taking: () => this.running && this.owned.has(p),
      holding: () => this.owned.has(p),
      retryDelayMs: this.options.retryDelayMs,
    };
  }

  /**
   * The batch from `next` on: from this process's recent entries when it has them, else from the
   * table. Past the last entry written here, the table is read at most once a poll interval (as
   * often as other processes' writes would be seen anyway); this process's own wake us at once.
   */
  private async read(p: number, next: number): Promise<Row[]> {
    const { topic } = this.key;
    const recent = this.recent.read(topic, p, next, this.options.batchSize);
    if (recent.entries.length > 0) return recent.entries;
    const now = this.now();
    const lastRead = this.tableReads.get(p) ?? -Infinity;
    if (recent.atEnd && now - lastRead < this.options.pollMs) return [];
    this.tableReads.set(p, now);
    return this.db
      .selectFrom('event_log')
      .selectAll()
      .where('topic', '=', topic)
      .where('partition_no', '=', p)
      .where('log_offset', '>=', next)
      .orderBy('log_offset')
      .limit(this.options.batchSize)
      .execute();
  }

  /**
   * Delivers `rows` and returns how many, from the first, were handled. In order, one after the
   * other, unless the subscription is unordered: then all at once, and the count stops at the
   * first failure (those after it that succeeded come again: handlers are idempotent).
   */
  private async deliverAll(p: number, rows: readonly Row[]): Promise<number> {
    if (this.subscription.ordered === false) {
      if (!this.running || !this.owned.has(p)) return 0;
      const outcomes = await Promise.all(rows.map((row) => this.deliver(row)));
      const failure = outcomes.indexOf(false);
      return failure === -1 ? rows.length : failure;
    }
    let handled = 0;
    for (const row of rows) {
      if (!this.running || !this.owned.has(p) || !(await this.deliver(row))) break;
      handled++;
    }
    return handled;
  }

  private async deliver(row: Entry): Promise<boolean> {
    const offset = Number(row.log_offset);
    const key = offset * 65_536 + row.partition_no;
    const failures = this.failures.get(key) ?? 0;
    const message: BusMessage = {
      topic: row.topic,
      partition: row.partition_no,
      offset,
      headers: row.decoded?.headers ?? (JSON.parse(row.headers) as MessageHeaders),
      envelope: row.decoded?.envelope ?? (JSON.parse(row.envelope) as EventEnvelope),
      deliveryCount: failures + 1,
      // The member's lease, renewed while it lives, already keeps its messages from the others.
      inProgress: () => undefined,
    };
    try {
      await this.subscription.handler(message);
      if (failures > 0) this.failures.delete(key);
      return true;
    } catch {
      this.failures.set(key, failures + 1);
      return false;
    }
  }

  /**
   * Waits for a publish to this topic (or the poll interval). After a wake-up it lingers a
   * moment, so that under load one read takes a batch instead of one message.
   */
  private idle(): Promise<void> {
    return new Promise((resolve) => {
      const topic = this.subscription.topic;
      const done = () => {
        clearTimeout(timer);
        this.wake.off(topic, woken);
        resolve();
      };
      const woken = () => {
        this.wake.off(topic, woken);
        clearTimeout(timer);
        setTimeout(done, this.running ? WAKE_LINGER_MS : 0);
      };
      const timer = setTimeout(done, this.options.pollMs);
      this.wake.on(topic, woken);
    });
  }
}

/** Freezes `value` and everything it holds. */
function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
