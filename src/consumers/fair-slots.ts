/** Thrown to those still waiting when the slots are closed. */
export class SlotsClosedError extends Error {
  constructor() {
    super('No more slots: shutting down');
    this.name = 'SlotsClosedError';
  }
}

interface Waiter {
  readonly grant: (release: () => void) => void;
  readonly refuse: (error: Error) => void;
}

/**
 * `capacity` slots shared fairly between owners (users): a free slot goes to the waiting owner
 * who holds fewest, in turn among equals (round robin; first come first served within an owner),
 * and no owner holds more than `perOwnerCap` at once. So one owner's many long jobs neither queue another
 * owner's job behind all of theirs nor, with a cap below the capacity, take every slot.
 *
 * @example
 *   const release = await slots.acquire(userId);
 *   try { await run(); } finally { release(); }
 */
export class FairSlots<Owner> {
  private readonly held = new Map<Owner, number>();
  /** Owners with someone waiting, in turn order (a Map keeps insertion order). */
  private readonly waiting = new Map<Owner, Waiter[]>();
  private inUse = 0;
  private closed = false;

  constructor(
    readonly capacity: number,
    readonly perOwnerCap: number = capacity,
  ) {
    if (capacity < 1 || perOwnerCap < 1) throw new RangeError('capacity and cap must be at least 1');
  }

  /** Resolves with the slot's release function once `owner` has a slot. */
  acquire(owner: Owner): Promise<() => void> {
    if (this.closed) return Promise.reject(new SlotsClosedError());
    return new Promise((grant, refuse) => {
      const queue = this.waiting.get(owner);
      if (queue) queue.push({ grant, refuse });
      else this.waiting.set(owner, [{ grant, refuse }]);
      this.dispatch();
    });
  }

  /** Slots in use, and jobs waiting for one. */
  stats(): { inUse: number; waiting: number } {
    let waiting = 0;
    for (const queue of this.waiting.values()) waiting += queue.length;
    return { inUse: this.inUse, waiting };
  }

  /** Refuses everyone waiting (and later callers); slots in use are released as usual. */
  close(): void {
    this.closed = true;
    const refused = [...this.waiting.values()].flat();
    this.waiting.clear();
    for (const waiter of refused) waiter.refuse(new SlotsClosedError());
  }

  private dispatch(): void {
    while (this.inUse < this.capacity) {
      const owner = this.nextOwner();
      if (owner === undefined) return;
      const queue = this.waiting.get(owner)!;
      const waiter = queue.shift()!;
      // Its turn is used: to the back of the line (or out of it).
      this.waiting.delete(owner);
      if (queue.length > 0) this.waiting.set(owner, queue);
      this.inUse++;
      this.held.set(owner, (this.held.get(owner) ?? 0) + 1);
      waiter.grant(this.releaser(owner));
    }
  }

  /** Of the owners who wait and are under the cap, the one holding fewest slots; first in turn on a tie. */
  private nextOwner(): Owner | undefined {
    let best: Owner | undefined;
    let fewest = this.perOwnerCap;
    for (const owner of this.waiting.keys()) {
      const held = this.held.get(owner) ?? 0;
      if (held < fewest) {
        best = owner;
        fewest = held;
      }
    }
    return best;
  }

  private releaser(owner: Owner): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.inUse--;
      const held = this.held.get(owner)! - 1;
      if (held === 0) this.held.delete(owner);
      else this.held.set(owner, held);
      this.dispatch();
    };
  }
}
