import { randomUUID } from 'node:crypto';
import type { OutgoingEvent } from '../domain/events.js';
import type { UrlMappingRepository } from '../ports/url-mapping-repository.js';

/**
 * Mappings per flush transaction, each one statement and one `url.clicked` event: fewer, larger
 * transactions write fewer pages and events, while one still holds the event loop (SQLite) for
 * only a few milliseconds, and its event stays well under a broker's message size (~25 KB).
 */
const CHUNK = 1_000;
/** Mappings whose clicks are folded per compaction transaction (the event loop is let go in between). */
const COMPACT_CHUNK = 500;
/**
 * Mappings this instance writes clicks for before it compacts, whatever the interval: it bounds
 * the rows waiting to be folded (one per mapping), so that the pages a flush writes stay few.
 */
const COMPACT_AFTER_MAPPINGS = 100_000;
/**
 * How long the database remembers a click writer (see `UrlMappingRepository.addClicks`): a chunk
 * whose answer was lost is written again at the first flush the database answers, so this only
 * has to outlast an outage; a week of one row per process start.
 */
const WRITER_MEMORY_MS = 7 * 24 * 60 * 60 * 1000;

export interface ClickBufferLogger {
  error(object: unknown, message: string): void;
}

export interface ClickBufferOptions {
  /** How often buffered clicks are written. */
  readonly flushIntervalMs: number;
  /** How often written clicks are folded into the mappings' counts (`compactClicks`). */
  readonly compactIntervalMs: number;
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** Clicks not written yet, by mapping id: valid only in the turn it is given in. */
export type PendingClicks = (id: number) => number;

/** A read of stored click counts that adds this instance's unwritten clicks (see `ClickBuffer.readCounts`). */
export interface CountReader {
  readCounts<T, R>(read: () => Promise<T>, add: (value: T, pending: PendingClicks) => R): Promise<R>;
}

/** A chunk of clicks asked to be written, under its place in this buffer's order of writes. */
interface Chunk {
  readonly seq: number;
  readonly clicks: Map<number, number>;
}

/** A promise and the function that settles it. */
function signal(): { promise: Promise<void>; settle(): void } {
  let settle!: () => void;
  const promise = new Promise<void>((resolve) => (settle = resolve));
  return { promise, settle };
}

/**
 * Counts clicks in memory and writes them to the database in batches, so that the redirect
 * path never waits on a write. `readCounts` reads stored counts and adds the clicks not yet
 * visible in the database, so that reads on this instance see every click at once. Now and then
 * it has the repository fold the written clicks into the stored counts, in chunks.
 *
 * Each chunk is written under this buffer's writer id and a sequence number, and a chunk whose
 * write failed is written again, as it is, before anything else: the database adds a chunk once
 * (`addClicks`), so a chunk whose commit went through but whose answer was lost (a connection
 * dropped during COMMIT) is not counted twice.
 */
export class ClickBuffer implements CountReader {
  private buffered = new Map<number, number>();
  /** Taken by the flush under way and not yet put in a chunk. */
  private inFlight = new Map<number, number>();
  /** Chunks being written or whose write failed, oldest first: each is written again, as it is, until it is in. */
  private unconfirmed: Chunk[] = [];
  private readonly writer = randomUUID();
  private seq = 0;
  private flushing: Promise<void> | undefined;
  private compacting: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;
  /** Mappings this instance wrote clicks for since it last compacted (at most COMPACT_AFTER_MAPPINGS). */
  private written = new Set<number>();
  private lastCompaction = Date.now();
  private logger: ClickBufferLogger = { error: () => undefined };
  /** `readCounts` calls whose read is under way; no chunk is written while there are any. */
  private readers = 0;
  /** Settled when the last read under way ends (a chunk waits for it). */
  private readsEnded: ReturnType<typeof signal> | undefined;
  /** Set from when a chunk asks to be written until it is: reads that start meanwhile wait for it. */
  private chunkTurn: Promise<void> | undefined;

  constructor(
    private readonly repository: Pick<UrlMappingRepository, 'addClicks' | 'compactClicks' | 'forgetClickWriters'>,
    private readonly options: ClickBufferOptions,
    /** The `url.clicked` batch event of a flush, recorded with it. */
    private readonly clickedEvent?: (clicks: ReadonlyArray<readonly [id: number, count: number]>) => OutgoingEvent,
  ) {}

  /** Starts flushing every interval, and compacting when due; failures are logged to `logger` and retried. */
  start(logger: ClickBufferLogger): void {
    this.logger = logger;
    this.stopping = false;
    this.lastCompaction = Date.now();
    this.timer ??= setInterval(() => void this.tick(), this.options.flushIntervalMs);
    this.timer.unref();
  }

  /** Stops the timer, lets a compaction under way end after its current chunk, and writes everything still buffered. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.stopping = true;
    await this.compacting;
    await this.flush();
    if (this.buffered.size > 0) await this.flush();
  }

  record(id: number): void {
    this.buffered.set(id, (this.buffered.get(id) ?? 0) + 1);
  }

  /**
   * Clicks on `id` that the database does not show yet (what a chunk being written holds
   * included). A chunk whose write failed counts until it is written again: if its commit had
   * gone through unanswered, a read between the database's return and that write (the next
   * flush) counts it twice.
   */
  pending(id: number): number {
    let n = (this.buffered.get(id) ?? 0) + (this.inFlight.get(id) ?? 0);
    for (const chunk of this.unconfirmed) n += chunk.clicks.get(id) ?? 0;
    return n;
  }

  /**
   * Runs `read` (of stored counts: a listing, an update's returned row, an export page) while no
   * chunk of clicks is being written, then `add` in the same turn as the read ends, with the
   * clicks the database does not show yet. A chunk committing during the read would otherwise
   * count twice (the read saw it, and it was still pending) or not at all (the read missed it,
   * and it was no longer pending). A read waits for a chunk under way or asked for; a chunk
   * waits for the reads under way, so that a steady stream of reads cannot hold the flush off.
   */
  async readCounts<T, R>(read: () => Promise<T>, add: (value: T, pending: PendingClicks) => R): Promise<R> {
    while (this.chunkTurn) await this.chunkTurn;
    this.readers++;
    try {
      return add(await read(), (id) => this.pending(id));
    } finally {
      if (--this.readers === 0) {
        this.readsEnded?.settle();
        this.readsEnded = undefined;
      }
    }
  }

  /**
   * Drops the clicks on `id` (its count is being set or the mapping removed), after any write
   * of them already under way has finished, so that write cannot land on top of the new value.
   */
  async discard(id: number): Promise<void> {
    const writing = this.inFlight.has(id) || this.unconfirmed.some((chunk) => chunk.clicks.has(id));
    if (writing && this.flushing) await this.flushing;
    this.buffered.delete(id);
    // A failed chunk is written again without them: if its first write went through, it did so
    // before the new value, which replaces it.
    for (const chunk of this.unconfirmed) chunk.clicks.delete(id);
    this.unconfirmed = this.unconfirmed.filter((chunk) => chunk.clicks.size > 0);
  }

  /**
   * Writes the buffered clicks, a chunk per transaction, letting waiting requests in between
   * chunks (SQLite writes block the event loop). Concurrent calls share the write under way.
   */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing.then(() => (this.hasUnwritten() ? this.flush() : undefined));
    if (!this.hasUnwritten()) return Promise.resolve();
    this.inFlight = this.buffered;
    this.buffered = new Map();
    this.flushing = this.writeInFlight()
      .catch((error: unknown) => {
        // The failed chunk stays in `unconfirmed`, to be written again as it is. What was not
        // yet put in a chunk goes back to the buffer, in the same turn as it leaves `inFlight`,
        // so that no read sees it in both or in neither.
        const unwritten = this.inFlight;
        this.inFlight = new Map();
        for (const [id, n] of unwritten) this.buffered.set(id, (this.buffered.get(id) ?? 0) + n);
        const mappings = unwritten.size + this.unconfirmed.reduce((sum, chunk) => sum + chunk.clicks.size, 0);
        this.logger.error({ err: error, mappings }, 'click flush failed; will retry');
      })
      .finally(() => {
        this.inFlight = new Map();
        this.flushing = undefined;
      });
    return this.flushing;
  }

  /**
   * Folds every click written so far (by any instance) into the stored counts, a chunk of
   * mappings per transaction, letting waiting requests in between. Concurrent calls share it.
   */
  compact(): Promise<void> {
    this.compacting ??= this.compactAll()
      .catch((error: unknown) => this.logger.error({ err: error }, 'click compaction failed; will retry'))
      .finally(() => {
        this.compacting = undefined;
      });
    return this.compacting;
  }

  private async tick(): Promise<void> {
    await this.flush();
    const due =
      this.written.size >= COMPACT_AFTER_MAPPINGS || Date.now() - this.lastCompaction >= this.options.compactIntervalMs;
    if (due && !this.stopping) void this.compact();
  }

  private hasUnwritten(): boolean {
    return this.buffered.size > 0 || this.unconfirmed.length > 0;
  }

  private async compactAll(): Promise<void> {
    this.written = new Set();
    this.lastCompaction = Date.now();
    await this.repository.forgetClickWriters(this.lastCompaction - WRITER_MEMORY_MS);
    let after: number | undefined;
    do {
      ({ next: after } = await this.repository.compactClicks({ after, limit: COMPACT_CHUNK }));
      if (after !== undefined) await nextTurn();
    } while (after !== undefined && !this.stopping);
  }

  /** Writes the chunks that failed before, in order, then what the flush took, a chunk at a time. */
  private async writeInFlight(): Promise<void> {
    while (this.unconfirmed.length > 0) {
      await this.writeChunk(this.unconfirmed[0]!);
      await nextTurn();
    }
    // In id order: each chunk's rows lie together in the deltas table, which is keyed by id.
    const deltas = [...this.inFlight].sort((a, b) => a[0] - b[0]);
    for (let start = 0; start < deltas.length; start += CHUNK) {
      // From `inFlight` to `unconfirmed` in one turn: a read sees these clicks pending throughout.
      const chunk: Chunk = { seq: ++this.seq, clicks: new Map(deltas.slice(start, start + CHUNK)) };
      for (const [id] of chunk.clicks) this.inFlight.delete(id);
      this.unconfirmed.push(chunk);
      await this.writeChunk(chunk);
      if (start + CHUNK < deltas.length) await nextTurn();
    }
  }

  /**
   * Writes the oldest unconfirmed chunk once no read of counts is under way (`readCounts`), and
   * takes it out of `unconfirmed` in the turn its write ends (whether it was added now or had
   * been before, unanswered).
   */
  private async writeChunk(chunk: Chunk): Promise<void> {
    const event = this.clickedEvent;
    const turn = signal();
    this.chunkTurn = turn.promise;
    try {
      if (this.readers > 0) await (this.readsEnded ??= signal()).promise;
      const clicks = [...chunk.clicks];
      if (clicks.length > 0) {
        await this.repository.addClicks(clicks, event && ((written) => [event(written)]), {
          writer: this.writer,
          seq: chunk.seq,
          at: Date.now(),
        });
      }
      this.unconfirmed = this.unconfirmed.filter((other) => other !== chunk);
      for (const [id] of clicks) if (this.written.size < COMPACT_AFTER_MAPPINGS) this.written.add(id);
    } finally {
      this.chunkTurn = undefined;
      turn.settle();
    }
  }
}
