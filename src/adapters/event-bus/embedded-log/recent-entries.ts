import { type LogEntry, partitionKey } from './log-entry.js';

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
export class RecentEntries {
  private readonly runs = new Map<string, { first: number; entries: LogEntry[] }>();

  add(entry: LogEntry): void {
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
  read(topic: string, partition: number, from: number, limit: number): { entries: LogEntry[]; atEnd: boolean } {
    const run = this.runs.get(partitionKey(topic, partition));
    if (run === undefined) return { entries: [], atEnd: false };
    const end = run.first + run.entries.length;
    if (from < run.first || from >= end) return { entries: [], atEnd: from === end };
    return { entries: run.entries.slice(from - run.first, from - run.first + limit), atEnd: false };
  }
}
