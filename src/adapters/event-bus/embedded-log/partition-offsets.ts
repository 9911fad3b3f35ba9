import { type Kysely, sql } from 'kysely';
import type { DatabaseSchema } from '../../storage/schema.js';
import { partitionKey } from './log-entry.js';
import type { LogStatements } from './log-statements.js';

/** Hands out the offsets of appended entries, partition by partition (the `event_partitions` counters). */
export class PartitionOffsets {
  /** Per partition, the next offset as this process last saw it (see `take`). */
  private readonly expected = new Map<string, number>();

  constructor(
    private readonly statements: LogStatements,
    /** PostgreSQL: the partitions of a batch are taken in one statement (a round trip each otherwise). */
    private readonly dialect: 'sqlite' | 'postgres' = 'sqlite',
  ) {}

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

  /** The first of `count` consecutive offsets of the partition, taken inside `trx` in one statement. */
  async takeMany(trx: Kysely<DatabaseSchema>, topic: string, partition: number, count: number): Promise<number> {
    if (count === 1) return this.take(trx, topic, partition);
    const at = { topic, partition, count };
    let [row] = (await this.statements.takeOffsets.run(trx, at)).rows;
    if (row === undefined) {
      await this.statements.createPartition.run(trx, { topic, partition });
      [row] = (await this.statements.takeOffsets.run(trx, at)).rows;
    }
    const next = Number(row!.next_offset);
    this.expected.set(partitionKey(topic, partition), next);
    return next - count;
  }

  /**
   * For each of `wanted` (in topic and partition order) the first of its `count` offsets. On
   * PostgreSQL in one statement, which locks the partitions' counters in that order first, as
   * single appends do, so that no two transactions wait for each other's in a cycle.
   */
  async takeAll(trx: Kysely<DatabaseSchema>, wanted: readonly PartitionWant[]): Promise<number[]> {
    const firsts = new Map<string, number>();
    if (this.dialect === 'postgres' && wanted.length > 1) {
      const { rows } = await sql<{ topic: string; partition_no: number; next_offset: string | number }>`
        WITH wanted AS (
          SELECT * FROM unnest(CAST(${wanted.map((w) => w.topic)} AS TEXT[]),
            CAST(${wanted.map((w) => w.partition)} AS INTEGER[]), CAST(${wanted.map((w) => w.count)} AS BIGINT[]))
            AS w(topic, partition_no, n)),
        locked AS MATERIALIZED (
          SELECT p.topic FROM event_partitions AS p
          WHERE (p.topic, p.partition_no) IN (SELECT topic, partition_no FROM wanted)
          ORDER BY p.topic, p.partition_no FOR UPDATE)
        UPDATE event_partitions AS p SET next_offset = p.next_offset + w.n
        FROM wanted AS w
        WHERE p.topic = w.topic AND p.partition_no = w.partition_no AND (SELECT count(*) FROM locked) >= 0
        RETURNING p.topic, p.partition_no, p.next_offset`.execute(trx);
      for (const row of rows) {
        const key = partitionKey(row.topic, Number(row.partition_no));
        this.expected.set(key, Number(row.next_offset));
        firsts.set(key, Number(row.next_offset));
      }
    }
    const result: number[] = [];
    for (const { topic, partition, count } of wanted) {
      const next = firsts.get(partitionKey(topic, partition));
      // A partition without its counter row yet (its first message ever) is created on the way.
      result.push(next === undefined ? await this.takeMany(trx, topic, partition, count) : next - count);
    }
    return result;
  }
}

/** `count` offsets wanted of one partition of one topic. */
export interface PartitionWant {
  readonly topic: string;
  readonly partition: number;
  readonly count: number;
}
