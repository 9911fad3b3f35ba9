import type { Kysely } from 'kysely';
import type { DatabaseSchema } from '../../storage/schema.js';
import { PeriodicTask } from '../../../support/periodic-task.js';
import { partitionKey } from './log-entry.js';

/**
 * The committed end of every partition of the log (`event_partitions.next_offset`: an entry's
 * offset is taken and its row written in one transaction), read by one statement once a poll
 * interval. A consumer past the last entry in memory reads its partition from the table only
 * when this says the table holds entries at or after where it is (GroupConsumer.read), instead
 * of every partition of every group reading the table every poll interval whether or not
 * anything was written (about 160 reads a second in an idle service with the defaults). An entry
 * committed after a read is seen at the next one, within a poll interval, as before. Until a
 * read has succeeded (or after one failed), every partition may hold entries.
 */
export class PartitionEnds {
  private ends: Map<string, number> | undefined;
  private readonly reads: PeriodicTask;

  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    everyMs: number,
  ) {
    // `read` fails quietly (every partition may then hold entries): nothing for the task to log.
    this.reads = new PeriodicTask('partition ends', everyMs, () => this.read(), { warn: () => undefined });
  }

  /** Reads them every poll interval from now on, and once now (done when it returns). */
  start(): Promise<void> {
    this.reads.start();
    return this.reads.run();
  }

  stop(): Promise<void> {
    return this.reads.stop();
  }

  /** Whether the table may hold entries of the partition at offset `next` or after. */
  mayHold(topic: string, partition: number, next: number): boolean {
    if (this.ends === undefined) return true;
    // No row: nothing was ever appended there (as of the last read).
    return (this.ends.get(partitionKey(topic, partition)) ?? 0) > next;
  }

  private async read(): Promise<void> {
    try {
      const rows = await this.db
        .selectFrom('event_partitions')
        .select(['topic', 'partition_no', 'next_offset'])
        .execute();
      this.ends = new Map(rows.map((r) => [partitionKey(r.topic, r.partition_no), Number(r.next_offset)]));
    } catch {
      this.ends = undefined; // unknown: every consumer reads the table until a read succeeds
    }
  }
}
