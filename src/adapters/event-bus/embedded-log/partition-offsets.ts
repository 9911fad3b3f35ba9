import type { Kysely } from 'kysely';
import type { DatabaseSchema } from '../../storage/schema.js';
import { partitionKey } from './log-entry.js';
import type { LogStatements } from './log-statements.js';

/** Hands out the offsets of appended entries, partition by partition (the `event_partitions` counters). */
export class PartitionOffsets {
  /** Per partition, the next offset as this process last saw it (see `take`). */
  private readonly expected = new Map<string, number>();

  constructor(private readonly statements: LogStatements) {}

  /**
   * The partition's next offset, taken inside `trx`. The offset this process expects is tried
   * first, with the counter's value as a condition (cheaper than reading the counter back); when
   * another process appended meanwhile, or a transaction that took one was rolled back, the
   * condition fails and the counter is read back instead. Only the condition decides: the
   * expectation is a hint, never trusted.
   */
  async take(trx: Kysely<DatabaseSchema>, topic: string, partition: number): Promise<number> {
    const key = partitionKey(topic, partition);
    const expected = this.expected.get(key);
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
    this.expected.set(key, offset + 1);
    return offset;
  }
}
