import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Kysely } from 'kysely';
import type { EventEnvelope, MessageHeaders } from '../../../domain/events.js';
import type { BusMessage, SubscribeOptions } from '../../../ports/event-bus.js';
import type { DatabaseSchema } from '../../storage/schema.js';
import { InFlightWindow } from '../in-flight-window.js';
import { deliverWindowed, type PartitionAccess } from '../windowed-partition.js';
import { type GroupKey, GroupLeases } from './group-leases.js';
import type { LogContext } from './log-context.js';
import type { LogEntry, LogRow } from './log-entry.js';

/**
 * How long a consumer woken by a publish waits for more before it reads: under load, one read
 * and one position commit then cover a few hundred messages instead of a handful.
 */
const WAKE_LINGER_MS = 20;

/** One member of a consumer group: holds a fair share of the partitions and works each in order. */
export class GroupConsumer {
  private readonly group: GroupKey;
  private readonly leases: GroupLeases;
  /** The partitions this member holds a lease on: its share, and those it is releasing. */
  private readonly owned = new Set<number>();
  /**
   * Held beyond the share while their worker finishes what it handed out (and commits it): nothing
   * new is taken from them, and they go back at the first round after.
   */
  private readonly releasing = new Set<number>();
  private readonly workers = new Map<number, Promise<void>>();
  /** Failed deliveries so far, by offset × 65,536 + partition. */
  private readonly failures = new Map<number, number>();
  /**
   * The newest offset handed to the handler in each partition. Entries are handed over in offset
   * order, so one at or before it comes again: after its position's commit was lost (the
   * database away, the partition lost and taken back), the batch is read again from the
   * committed position, and its entries are redeliveries although none of them failed. (This
   * member's: an entry that a member which died had handed out comes to the next with 1, as the
   * log keeps no count of deliveries; nothing here decides by the count.)
   */
  private readonly handedOut = new Map<number, number>();
  /** When each partition was last read from the table. */
  private readonly tableReads = new Map<number, number>();
  private running = true;
  private timer: NodeJS.Timeout | undefined;
  private rebalancing: Promise<void> | undefined;
  /** With SubscribeOptions.concurrency: the places in flight, shared by this member's partitions. */
  private readonly window: InFlightWindow | undefined;

  constructor(
    private readonly log: LogContext,
    private readonly subscription: SubscribeOptions,
  ) {
    this.group = { group_name: subscription.group, topic: subscription.topic };
    // The group's own ack wait, when it has one, is its lease: a dead member's work moves on after it.
    const leaseMs = subscription.ackWaitMs ?? log.options.leaseMs;
    this.leases = new GroupLeases(log.db, this.group, randomUUID(), log.options.partitions, leaseMs);
    if (subscription.concurrency !== undefined) this.window = new InFlightWindow(subscription.concurrency);
  }

  private get db(): Kysely<DatabaseSchema> {
    return this.log.db;
  }

  async start(): Promise<void> {
    await this.createPositions();
    await this.leases.create();
    await this.rebalance();
    this.timer = setInterval(() => void this.rebalance(), Math.max(50, Math.floor(this.leases.leaseMs / 3)));
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.running = false;
    if (this.timer) clearInterval(this.timer);
    this.log.wake.emit(this.group.topic);
    await this.rebalancing;
    await Promise.all([...this.workers.values(), this.window?.close()]);
    await this.leases.leave();
  }

  /**
   * Makes sure the group has a position in every partition: the start of the log, or with
   * `startAt: 'latest'` the partition's end as it is now. A position already there stays.
   */
  private async createPositions(): Promise<void> {
    const ends = new Map<number, number>();
    if (this.subscription.startAt === 'latest') {
      const rows = await this.db
        .selectFrom('event_partitions')
        .select(['partition_no', 'next_offset'])
        .where('topic', '=', this.group.topic)
        .execute();
      for (const row of rows) ends.set(row.partition_no, Number(row.next_offset));
    }
    await this.db
      .insertInto('consumer_offsets')
      .values(
        Array.from({ length: this.log.options.partitions }, (_, p) => ({
          ...this.group,
          partition_no: p,
          next_offset: ends.get(p) ?? 0,
        })),
      )
      .onConflict((oc) => oc.columns(['group_name', 'topic', 'partition_no']).doNothing())
      .execute();
  }

  /** Renews this member's leases and takes or gives back partitions towards a fair share. */
  private rebalance(): Promise<void> {
    this.rebalancing ??= this.rebalanceOnce()
      .catch(() => undefined) // a failed round is retried at the next tick; the leases bound the damage
      .finally(() => (this.rebalancing = undefined));
    return this.rebalancing;
  }

  private async rebalanceOnce(): Promise<void> {
    if (!this.running) return;
    const { kept, releasing } = await this.leases.rebalance(this.log.now(), (p) => this.workers.has(p));
    this.owned.clear();
    this.releasing.clear();
    for (const p of kept) this.owned.add(p);
    for (const p of releasing) {
      this.owned.add(p);
      this.releasing.add(p);
    }
    for (const p of kept) this.startWorker(p);
    if (releasing.length > 0) this.log.wake.emit(this.group.topic); // an idle worker sees it sooner
  }

  /** Whether to hand out more of partition `p`: the member runs, holds it and is not releasing it. */
  private taking(p: number): boolean {
    return this.running && this.owned.has(p) && !this.releasing.has(p);
  }

  /** Starts working partition `p` unless it is worked already (a worker stops once `p` is not held). */
  private startWorker(p: number): void {
    if (this.running && !this.workers.has(p)) {
      this.workers.set(
        p,
        this.work(p).finally(() => this.workers.delete(p)),
      );
    }
  }

  /** Delivers partition `p` in order (or windowed) while this member holds it. */
  private async work(p: number): Promise<void> {
    if (this.window) return deliverWindowed(this.partitionAccess(p), this.window);
    let next: number | undefined;
    while (this.taking(p)) {
      try {
        next ??= Number((await this.positionRow(p)).next_offset);
        const rows = await this.read(p, next);
        if (rows.length === 0) {
          await this.idle();
          continue;
        }
        // Handle the batch; commit the position once for what was handled.
        const from = next;
        const handled = await this.deliverAll(p, rows);
        if (handled > 0) next = Number(rows[handled - 1]!.log_offset) + 1;
        const failed = handled < rows.length && this.taking(p);
        if (next > from) await this.commit(p, next);
        if (failed) {
          next = undefined; // read the committed position again, then retry the message that failed
          await sleep(this.log.options.retryDelayMs);
        }
      } catch {
        next = undefined;
        await sleep(this.log.options.retryDelayMs); // the database is away: try again shortly
      }
    }
  }

  /**
   * The group's committed position in partition `p`, as its row. The query's own promise, not an
   * async wrapper: the worker's steps keep the timing they were tuned with.
   */
  private positionRow(p: number) {
    return this.db
      .selectFrom('consumer_offsets')
      .select('next_offset')
      .where((eb) => eb.and({ ...this.group, partition_no: p }))
      .executeTakeFirstOrThrow();
  }

  /** Commits `next` as the group's position in partition `p` (in the group commit, when there is one). */
  private commit(p: number, next: number): Promise<unknown> {
    const { statements, options } = this.log;
    const position = { ...this.group, partition: p, next_offset: next };
    const commit = (db: Kysely<DatabaseSchema>) => statements.commitPosition.run(db, position);
    return options.transactions ? options.transactions(this.db, commit) : commit(this.db);
  }

  private partitionAccess(p: number): PartitionAccess<LogRow> {
    return {
      position: async () => Number((await this.positionRow(p)).next_offset),
      read: (offset) => this.read(p, offset),
      offsetOf: (row) => Number(row.log_offset),
      deliver: (row) => this.deliver(row),
      commit: async (next) => {
        await this.commit(p, next);
      },
      idle: () => this.idle(),
      taking: () => this.taking(p),
      holding: () => this.owned.has(p),
      retryDelayMs: this.log.options.retryDelayMs,
    };
  }

  /**
   * The batch from `next` on: from this process's recent entries when it has them, else from the
   * table. Past the last entry written here, the table is read at most once a poll interval (as
   * often as other processes' writes would be seen anyway); this process's own wake us at once.
   * Nor is it read while the partition's committed end (PartitionEnds, read once a poll interval
   * for all of them) is not past `next`.
   */
  private async read(p: number, next: number): Promise<LogRow[]> {
    const { topic } = this.group;
    const { options } = this.log;
    const recent = this.log.recent.read(topic, p, next, options.batchSize);
    if (recent.entries.length > 0) return recent.entries;
    const now = this.log.now();
    const lastRead = this.tableReads.get(p) ?? -Infinity;
    if (recent.atEnd && now - lastRead < options.pollMs) return [];
    if (!this.log.ends.mayHold(topic, p, next)) return [];
    this.tableReads.set(p, now);
    const { rows } = await this.log.statements.readEntries.run(this.db, {
      topic,
      partition: p,
      next,
      limit: options.batchSize,
    });
    return rows;
  }

  /**
   * Delivers `rows` and returns how many, from the first, were handled. In order, one after the
   * other, unless the subscription is unordered: then all at once, and the count stops at the
   * first failure (those after it that succeeded come again: handlers are idempotent).
   */
  private async deliverAll(p: number, rows: readonly LogRow[]): Promise<number> {
    if (this.subscription.ordered === false) {
      if (!this.taking(p)) return 0;
      const outcomes = await Promise.all(rows.map((row) => this.deliver(row)));
      const failure = outcomes.indexOf(false);
      return failure === -1 ? rows.length : failure;
    }
    let handled = 0;
    for (const row of rows) {
      if (!this.taking(p) || !(await this.deliver(row))) break;
      handled++;
    }
    return handled;
  }

  /** Hands `row` to the handler; true once handled, false (and counted) when the handler threw. */
  private async deliver(row: LogEntry): Promise<boolean> {
    const offset = Number(row.log_offset);
    const key = offset * 65_536 + row.partition_no;
    const failures = this.failures.get(key) ?? 0;
    const handedOut = this.handedOut.get(row.partition_no) ?? -1;
    if (offset > handedOut) this.handedOut.set(row.partition_no, offset);
    const message: BusMessage = {
      topic: row.topic,
      partition: row.partition_no,
      offset,
      headers: row.decoded?.headers ?? (JSON.parse(row.headers) as MessageHeaders),
      envelope: row.decoded?.envelope ?? (JSON.parse(row.envelope) as EventEnvelope),
      deliveryCount: Math.max(failures + 1, offset <= handedOut ? 2 : 1),
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
      const { topic } = this.group;
      const { wake } = this.log;
      const done = () => {
        clearTimeout(timer);
        wake.off(topic, woken);
        resolve();
      };
      const woken = () => {
        wake.off(topic, woken);
        clearTimeout(timer);
        setTimeout(done, this.running ? WAKE_LINGER_MS : 0);
      };
      const timer = setTimeout(done, this.log.options.pollMs);
      wake.on(topic, woken);
    });
  }
}
