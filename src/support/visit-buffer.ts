import { randomUUID } from 'node:crypto';
import { encodeJournal } from '../domain/visit-journal.js';
import type { JournalEntry, VisitJournal } from '../ports/visit-journal.js';
import type { VisitRepository } from '../ports/visit-repository.js';
import { UserAgentClassifier } from './user-agents.js';
import { rawHeader } from './raw-headers.js';
import { CaptureJournal, VisitCapture } from './visit-capture.js';

export { visitorHash } from './visit-capture.js';

/**
 * Visits held while the database is away, beyond which new ones are dropped (and counted in the
 * log) rather than growing memory without end: tens of bytes each, captured or prepared.
 */
const MAX_HELD_VISITS = 2_000_000;
/** Visits prepared at a time, the event loop let in between (about 1 ms of work or less). */
const PREPARE_SLICE = 4_000;
/**
 * Visits captured, by default, at which a flush starts without waiting for the timer: a long
 * VISIT_FLUSH_INTERVAL_MS under heavy traffic would otherwise hold millions of visits in memory,
 * up to MAX_HELD_VISITS, and drop the ones after. Flushing sooner only loses less to a crash.
 * 100,000 visits are about 3 MB of columns; at the default interval a flush holds a few
 * thousand.
 */
const FLUSH_AT_VISITS = 100_000;

export interface VisitBufferLogger {
  error(object: unknown, message: string): void;
  warn(object: unknown, message: string): void;
}

export interface VisitBufferOptions {
  /** How often captured visits are written (VISIT_FLUSH_INTERVAL_MS; by default CLICK_FLUSH_INTERVAL_MS, with the clicks). */
  readonly flushIntervalMs: number;
  /** VISIT_COUNTRY_HEADER, lower-case; none read when undefined. */
  readonly countryHeader?: string | undefined;
  readonly classifier?: UserAgentClassifier;
  /** Unix ms now (tests give their own). */
  readonly now?: () => number;
  /** Visits captured at which a started buffer flushes without waiting for its timer (FLUSH_AT_VISITS). */
  readonly flushAtVisits?: number;
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * Captures visits on the redirect path (a few array pushes: the ids of three raw header values
 * and the address, never parsed there) and writes them every flush interval as one row of the
 * visit journal (src/domain/visit-journal.ts), which the fold task merges into segments every few
 * seconds (src/composition/visits.ts). At flush time each distinct `User-Agent` is classified
 * (cached), each referrer cut to its host, each country checked, and each visitor hashed with the
 * day's salt down to the register it raises; the addresses and the `User-Agent`s are dropped then
 * and never leave memory. A row that fails is kept, with its id, and written first at the next
 * flush: the journal skips an id it already has, so a row whose commit went through but whose
 * answer was lost is not written twice.
 */
export class VisitBuffer {
  private capture = new VisitCapture();
  /** The capture of the last flush, emptied, for the next one to take (see VisitCapture.clear). */
  private spare: VisitCapture | undefined;
  /** Prepared journal rows not yet written (oldest first). */
  private held: JournalEntry[] = [];
  private heldVisits = 0;
  private dropped = 0;
  private flushing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The capture the last flush for a full capture was asked for (see `flushFull`). */
  private fullAskedFor: VisitCapture | undefined;
  private readonly flushAtVisits: number;
  private readonly salts = new Map<number, string>();
  private readonly classifier: UserAgentClassifier;
  private readonly now: () => number;
  private logger: VisitBufferLogger = { error: () => undefined, warn: () => undefined };

  constructor(
    private readonly repository: Pick<VisitJournal, 'write'> & Pick<VisitRepository, 'daySalt'>,
    private readonly options: VisitBufferOptions,
  ) {
    this.classifier = options.classifier ?? new UserAgentClassifier();
    this.now = options.now ?? Date.now;
    this.flushAtVisits = options.flushAtVisits ?? FLUSH_AT_VISITS;
  }

  start(logger: VisitBufferLogger): void {
    this.logger = logger;
    this.timer ??= setInterval(() => void this.flush(), this.options.flushIntervalMs);
    this.timer.unref();
  }

  /** Stops the timer and writes what is captured (one more try for what fails). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.flush();
    if (this.size > 0) await this.flush();
  }

  /** Visits captured or prepared and not yet written. */
  get size(): number {
    return this.capture.length + this.heldVisits;
  }

  /**
   * The redirect path's part: the `User-Agent`, `Referer` and country header values read from the
   * request's raw header list (Node's `[name, value, …]`, already there; reading `headers` would
   * build an object) and the address, each kept as its id in the capture (`VisitCapture`), until
   * the flush; which starts at once when the capture is full (`flushAtVisits`).
   */
  record(urlId: number, rawHeaders: readonly string[], address: string | undefined): void {
    if (this.capture.length + this.heldVisits >= MAX_HELD_VISITS) {
      this.dropped++;
      return;
    }
    const countryHeader = this.options.countryHeader;
    this.capture.add(
      urlId,
      this.now(),
      rawHeader(rawHeaders, 'user-agent'),
      rawHeader(rawHeaders, 'referer'),
      countryHeader === undefined ? undefined : rawHeader(rawHeaders, countryHeader),
      address,
    );
    if (this.capture.length >= this.flushAtVisits) this.flushFull();
  }

  /**
   * A flush for a full capture (after the flush under way, if there is one: `flush` chains),
   * asked for once a capture, not once a visit: a flush takes the capture and leaves a new one,
   * which asks again once it is full. When its flush could not take it (the database away before
   * its salts came), the timer's flushes retry, not every visit captured after.
   */
  private flushFull(): void {
    if (this.timer === undefined || this.fullAskedFor === this.capture) return;
    this.fullAskedFor = this.capture;
    void this.flush();
  }

  /** Whether `userAgent` is a bot's (COUNT_BOTS=false asks on the redirect path; cached). */
  isBot(userAgent: string | undefined): boolean {
    return this.classifier.isBot(userAgent);
  }

  /**
   * Writes what is held, then what was captured. A call while a write is under way waits for it,
   * then writes what was captured meanwhile (as the click buffer does): a flush slower than the
   * interval never leaves a visit waiting for a second tick, so a `kill -9` loses at most about
   * one interval's visits.
   */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing.then(() => (this.capture.length > 0 ? this.flush() : undefined));
    this.flushing = this.writeAll()
      .catch((error: unknown) => {
        this.logger.error({ err: error, visits: this.heldVisits }, 'visit flush failed; will retry');
      })
      .finally(() => {
        this.flushing = undefined;
      });
    return this.flushing;
  }

  private async writeAll(): Promise<void> {
    if (this.dropped > 0) {
      this.logger.warn({ dropped: this.dropped }, 'visits dropped: too many held while the database was away');
      this.dropped = 0;
    }
    await this.prepare();
    while (this.held.length > 0) {
      const entry = this.held[0]!;
      await this.repository.write(entry);
      this.held.shift();
      this.heldVisits -= entry.visits;
      if (this.held.length > 0) await nextTurn();
    }
  }

  /**
   * Turns the captured visits into a journal row (src/domain/visit-journal.ts), a slice at a time
   * with the event loop let in between; the capture (its addresses and `User-Agent`s) goes with
   * it. The day salts are fetched first, the capture still in place: when that fails, nothing has
   * moved.
   */
  private async prepare(): Promise<void> {
    let salts: Map<number, string>;
    // The days of what is captured by the time the salts are there (a visit after midnight may
    // have come while waiting): the capture is taken, synchronously, once every day has its salt.
    for (;;) {
      const days = this.capture.days();
      if (days.length === 0) return;
      salts = new Map();
      for (const day of days) salts.set(day, await this.salt(day));
      if (this.capture.days().every((day) => salts.has(day))) break;
    }
    const capture = this.capture;
    this.capture = this.spare ?? new VisitCapture();
    this.spare = undefined;
    this.heldVisits += capture.length;
    const journal = new CaptureJournal(capture, salts, this.classifier);
    while (!journal.done) {
      await nextTurn();
      journal.take(PREPARE_SLICE);
    }
    this.held.push({ id: randomUUID(), visits: capture.length, data: encodeJournal(journal.visits()) });
    capture.clear();
    if (this.fullAskedFor === capture) this.fullAskedFor = undefined; // asks again when it is full again
    this.spare = capture;
  }

  private async salt(day: number): Promise<string> {
    let salt = this.salts.get(day);
    if (salt === undefined) {
      salt = await this.repository.daySalt(day);
      for (const known of this.salts.keys()) if (known < day - 1) this.salts.delete(known);
      this.salts.set(day, salt);
    }
    return salt;
  }
}
