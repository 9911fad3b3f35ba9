import type { Kysely } from 'kysely';
import type { DatabaseSchema, EventTables } from '../../storage/schema.js';

/** A consumer group on one topic, as the group tables key it. */
export interface GroupKey {
  readonly group_name: string;
  readonly topic: string;
}

type Lease = Pick<EventTables['consumer_leases'], 'partition_no' | 'owner' | 'expires_at'>;

/** What a member holds after a round: its share to work, and partitions it hands over once their handler is done. */
export interface HeldPartitions {
  readonly kept: readonly number[];
  readonly releasing: readonly number[];
}

/**
 * One member's leases on the partitions of its group's topic. Members announce themselves with a
 * heartbeat; each holds at most a fair share (the partitions over the live members, rounded up),
 * renews what it holds, gives back what is beyond its share and takes partitions whose lease ran
 * out, so a crashed member's partitions move on once its leases expire.
 */
export class GroupLeases {
  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly group: GroupKey,
    private readonly member: string,
    private readonly partitions: number,
    /** How long a lease lasts without renewal. */
    readonly leaseMs: number,
  ) {}

  /** Makes sure every partition of the group has a lease row (free until a member takes it). */
  async create(): Promise<void> {
    const free = { ...this.group, owner: '', expires_at: 0 };
    await this.db
      .insertInto('consumer_leases')
      .values(Array.from({ length: this.partitions }, (_, p) => ({ ...free, partition_no: p })))
      .onConflict((oc) => oc.columns(['group_name', 'topic', 'partition_no']).doNothing())
      .execute();
  }

  /**
   * One round at time `now`: renews this member's leases and moves towards a fair share. What it
   * holds beyond its share goes back, but not a partition that is `busy` (its worker has messages
   * in the handler or not yet committed, which the next holder would deliver again): that one stays
   * `releasing`, renewed and taking nothing new, until a later round finds it done.
   */
  async rebalance(now: number, busy: (partition: number) => boolean = () => false): Promise<HeldPartitions> {
    const until = now + this.leaseMs;
    await this.announce(until);
    const live = await this.countLive(now);
    const share = Math.ceil(this.partitions / Math.max(1, Number(live.n)));
    await this.renewHeld(now, until);
    const leases = await this.leases();
    const held = leases.filter((l) => l.owner === this.member && Number(l.expires_at) > now).map((l) => l.partition_no);
    const kept = held.slice(0, share);
    const surplus = held.slice(share);
    const releasing = surplus.filter(busy);
    await this.giveBack(surplus.filter((p) => !busy(p)));
    await this.claimExpired(leases, kept, share, now, until);
    return { kept, releasing };
  }

  /** Gives back every lease this member holds and leaves the group (when it closes). */
  async leave(): Promise<void> {
    await this.db
      .updateTable('consumer_leases')
      .set({ owner: '', expires_at: 0 })
      .where((eb) => eb.and({ ...this.group, owner: this.member }))
      .execute();
    await this.db
      .deleteFrom('consumer_members')
      .where((eb) => eb.and({ ...this.group, member: this.member }))
      .execute();
  }

  /** The heartbeat: this member counts as live until `until`. */
  private announce(until: number) {
    return this.db
      .insertInto('consumer_members')
      .values({ ...this.group, member: this.member, expires_at: until })
      .onConflict((oc) => oc.columns(['group_name', 'topic', 'member']).doUpdateSet({ expires_at: until }))
      .execute();
  }

  private countLive(now: number) {
    return this.db
      .selectFrom('consumer_members')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where((eb) => eb.and(this.group))
      .where('expires_at', '>', now)
      .executeTakeFirstOrThrow();
  }

  /** Extends the leases this member still holds (an expired one may be another's already). */
  private renewHeld(now: number, until: number) {
    return this.db
      .updateTable('consumer_leases')
      .set({ expires_at: until })
      .where((eb) => eb.and({ ...this.group, owner: this.member }))
      .where('expires_at', '>', now)
      .execute();
  }

  private leases(): Promise<Lease[]> {
    return this.db
      .selectFrom('consumer_leases')
      .select(['partition_no', 'owner', 'expires_at'])
      .where((eb) => eb.and(this.group))
      .orderBy('partition_no')
      .execute();
  }

  private async giveBack(partitions: readonly number[]): Promise<void> {
    for (const p of partitions) {
      await this.db
        .updateTable('consumer_leases')
        .set({ owner: '', expires_at: 0 })
        .where((eb) => eb.and({ ...this.group, partition_no: p, owner: this.member }))
        .execute();
    }
  }

  /**
   * Takes expired leases, in partition order, until `kept` has `share` partitions. The condition
   * on the expiry decides: of two members claiming one partition, one update finds it expired.
   */
  private async claimExpired(leases: readonly Lease[], kept: number[], share: number, now: number, until: number) {
    for (const lease of leases) {
      if (kept.length >= share) break;
      if (Number(lease.expires_at) > now) continue;
      const claimed = await this.db
        .updateTable('consumer_leases')
        .set({ owner: this.member, expires_at: until })
        .where((eb) => eb.and({ ...this.group, partition_no: lease.partition_no }))
        .where('expires_at', '<=', now)
        .executeTakeFirst();
      if (Number(claimed.numUpdatedRows) === 1) kept.push(lease.partition_no);
    }
  }
}
