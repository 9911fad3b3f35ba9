import { type Kysely, sql } from 'kysely';
import type { DatabaseSchema } from '../../storage/schema.js';

/**
 * SQLite: notices commits made by other connections (other processes: `--workers`, a
 * command-line import) by `PRAGMA data_version`, which changes on this connection only when
 * another one commits, read once a poll interval. A consumer that has read its partition to the
 * end reads the log's table again only once this has changed (GroupConsumer.read), instead of
 * every partition of every group reading it every poll interval whether or not anything was
 * written (about 160 reads a second in an idle service with the defaults): this process's own
 * entries reach its consumers from memory (RecentEntries). `mark` is the value last read
 * (undefined before the first read, or after a read failed: then every consumer reads the table
 * as before).
 */
export class ForeignCommits {
  mark: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;

  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly everyMs: number,
  ) {}

  /** Starts watching (once; the first read before it returns). */
  async start(): Promise<void> {
    if (this.timer) return;
    this.timer = setInterval(() => void this.check(), this.everyMs);
    this.timer.unref();
    await this.check();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.checking;
  }

  private check(): Promise<void> {
    this.checking ??= (async () => {
      try {
        const { rows } = await sql<{ data_version: number }>`PRAGMA data_version`.execute(this.db);
        this.mark = Number(rows[0]?.data_version);
      } catch {
        this.mark = undefined; // unknown: the consumers read the table until the next read succeeds
      } finally {
        this.checking = undefined;
      }
    })();
    return this.checking;
  }
}
