import type { InFlightWindow } from './in-flight-window.js';

/** What the windowed delivery of one partition needs from its group member (the embedded log). */
export interface PartitionAccess<Row> {
  /** The group's committed position in the partition. */
  position(): Promise<number>;
  /** Entries from `offset` on, in order (a batch; none when there are none yet). */
  read(offset: number): Promise<readonly Row[]>;
  offsetOf(row: Row): number;
  /** Hands `row` to the handler; true once handled. */
  deliver(row: Row): Promise<boolean>;
  commit(next: number): Promise<void>;
  /** Waits for new entries (or the poll interval). */
  idle(): Promise<void>;
  /** Whether to keep taking entries (the member runs and holds the partition). */
  taking(): boolean;
  /** Whether the member still holds the partition (its position is still its to commit). */
  holding(): boolean;
  readonly retryDelayMs: number;
}

/**
 * Delivers a partition with up to the window's size in flight (SubscribeOptions.concurrency):
 * each entry is handed over once the window has room, without waiting for those before it, and
 * a failed one is tried again in its place. The committed position is the oldest entry not yet
 * handled, so what a crash interrupts (and nothing before it) is delivered again.
 */
export async function deliverWindowed<Row>(access: PartitionAccess<Row>, window: InFlightWindow): Promise<void> {
  const unhandled = new Set<number>();
  const inFlight = new Set<Promise<void>>();
  let next: number | undefined;
  let committed: number | undefined;
  let settled: () => void = () => undefined;
  const commit = async () => {
    const position = unhandled.size > 0 ? Math.min(...unhandled) : next;
    if (position === undefined || position === committed || !access.holding()) return;
    await access.commit(position);
    committed = position;
  };
  const handle = async (row: Row, offset: number) => {
    while (!(await access.deliver(row))) {
      if (!access.taking()) return; // stays unhandled: the next holder delivers it again
      await sleep(access.retryDelayMs);
    }
    unhandled.delete(offset);
    settled();
  };
  while (access.taking()) {
    try {
      next ??= committed = await access.position();
      const rows = await access.read(next);
      if (rows.length === 0) {
        await Promise.race([access.idle(), new Promise<void>((resolve) => (settled = resolve))]);
      }
      for (const row of rows) {
        if (!access.taking() || !(await window.acquire())) break;
        if (!access.taking()) {
          window.release();
          break;
        }
        const offset = access.offsetOf(row);
        unhandled.add(offset);
        next = offset + 1;
        const delivery: Promise<void> = handle(row, offset)
          .catch(() => undefined)
          .finally(() => {
            inFlight.delete(delivery);
            window.release();
          });
        inFlight.add(delivery);
      }
      await commit();
    } catch {
      await sleep(access.retryDelayMs); // the database is away: try again shortly
    }
  }
  while (inFlight.size > 0) await Promise.all(inFlight);
  await commit().catch(() => undefined);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
