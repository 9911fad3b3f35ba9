import { createHash, randomUUID } from 'node:crypto';
import { countryCode, dayOf, referrerHost, type VisitRecord } from '../domain/visit.js';
import type { VisitBatch, VisitRepository } from '../ports/visit-repository.js';
import { UserAgentClassifier } from './user-agents.js';
import { rawHeader } from './raw-headers.js';

/**
 * Visits per flush transaction, prepared and written with the event loop let in between: one
 * batch holds SQLite's writer and the event loop for a few ms only (5,000 held them for tens of
 * ms, which redirects waiting behind a flush saw as their p99).
 */
const BATCH_VISITS = 1_000;
/**
 * Visits held while the database is away, beyond which new ones are dropped (and counted in the
 * log) rather than growing memory without end: ~200 bytes each.
 */
const MAX_HELD_VISITS = 2_000_000;
/** Distinct header values a capture keeps one copy of (more are kept as they come). */
const MAX_INTERNED = 10_000;

export interface VisitBufferLogger {
  error(object: unknown, message: string): void;
  warn(object: unknown, message: string): void;
}

export interface VisitBufferOptions {
  /** How often captured visits are written (CLICK_FLUSH_INTERVAL_MS: with the clicks). */
  readonly flushIntervalMs: number;
  /** VISIT_COUNTRY_HEADER, lower-case; none read when undefined. */
  readonly countryHeader?: string | undefined;
  readonly classifier?: UserAgentClassifier;
  /** Unix ms now (tests give their own). */
  readonly now?: () => number;
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/**
 * Captures visits on the redirect path (a few array pushes: three raw header values and the
 * address, never parsed there) and writes them in batches every flush interval. At flush time
 * each visit's `User-Agent` is classified (cached), its referrer cut to the host, its country
 * checked, and its visitor hashed with the day's salt; the address and the `User-Agent` are
 * dropped then and never leave memory. A batch that fails is kept, with its id, and written
 * first at the next flush: the repository skips a batch id it already has, so a batch whose
 * commit went through but whose answer was lost is not written twice.
 */
export class VisitBuffer {
  private ids: number[] = [];
  private times: number[] = [];
  /** The `User-Agent`, `Referer` and country header of each visit (the request's other headers can go). */
  private agents: (string | undefined)[] = [];
  private referers: (string | undefined)[] = [];
  /** One copy of each `User-Agent` and `Referer` value of the capture (`interned`). */
  private strings = new Map<string, string>();
  private countries: (string | undefined)[] = [];
  private addresses: (string | undefined)[] = [];
  /** Prepared batches not yet written (oldest first). */
  private held: VisitBatch[] = [];
  private heldVisits = 0;
  private dropped = 0;
  private flushing: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly salts = new Map<number, string>();
  private readonly classifier: UserAgentClassifier;
  private readonly now: () => number;
  private logger: VisitBufferLogger = { error: () => undefined, warn: () => undefined };

  constructor(
    private readonly repository: Pick<VisitRepository, 'writeBatch' | 'daySalt'>,
    private readonly options: VisitBufferOptions,
  ) {
    this.classifier = options.classifier ?? new UserAgentClassifier();
    this.now = options.now ?? Date.now;
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
    return this.ids.length + this.heldVisits;
  }

  /**
   * The redirect path's part: the `User-Agent`, `Referer` and country header values read from the
   * request's raw header list (Node's `[name, value, …]`, already there; reading `headers` would
   * build an object) and the address, kept as they are until the flush. Only those strings are
   * held, not the list: the rest of a request dies young instead of being carried into the old
   * generation by the thousands of visits a flush interval holds.
   */
  record(urlId: number, rawHeaders: readonly string[], address: string | undefined): void {
    if (this.ids.length + this.heldVisits >= MAX_HELD_VISITS) {
      this.dropped++;
      return;
    }
    this.ids.push(urlId);
    this.times.push(this.now());
    this.agents.push(this.interned(rawHeader(rawHeaders, 'user-agent')));
    this.referers.push(this.interned(rawHeader(rawHeaders, 'referer')));
    const countryHeader = this.options.countryHeader;
    this.countries.push(countryHeader === undefined ? undefined : rawHeader(rawHeaders, countryHeader));
    this.addresses.push(address);
  }

  /**
   * The capture's own copy of `value` when it already holds an equal string, else `value` (kept as
   * the copy). A request's header strings then die young with the request, instead of thousands a
   * flush interval surviving into the old generation, whose collections paused the event loop for
   * 20 ms and more; and the flush's lookups by them hash each distinct string once.
   */
  private interned(value: string | undefined): string | undefined {
    if (value === undefined) return undefined;
    const known = this.strings.get(value);
    if (known !== undefined) return known;
    if (this.strings.size < MAX_INTERNED) this.strings.set(value, value);
    return value;
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
    if (this.flushing) return this.flushing.then(() => (this.ids.length > 0 ? this.flush() : undefined));
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
      const batch = this.held[0]!;
      await this.repository.writeBatch(batch);
      this.held.shift();
      this.heldVisits -= batch.visits.length;
      if (this.held.length > 0) await nextTurn();
    }
  }

  /** Turns the captured visits into batches: classified, hashed, the raw values dropped. */
  private async prepare(): Promise<void> {
    if (this.ids.length === 0) return;
    const capture = this.take();
    const { ids, times, agents, referers, countries, addresses } = capture;
    const count = ids.length;
    // Held from here: `size` counts the visits of a flush under way too (read while the timer's
    // flush waited for the database, it said none were left).
    this.heldVisits += count;
    // The salts first (the one step that can fail): on failure the capture is put back as it was.
    const salts = new Map<number, string>();
    try {
      for (const time of times) {
        const day = dayOf(time);
        if (!salts.has(day)) salts.set(day, await this.salt(day));
      }
    } catch (error) {
      this.heldVisits -= count;
      this.putBack(capture);
      throw error;
    }
    // By link (in time order within one): a link's visits of the capture are then in one batch (or
    // two next to each other), one segment, and the segments' index is written link by link.
    const order = byLink(ids);
    const hashOf = visitorHashes(salts);
    const hosts = new Map<string, string | null>();
    for (let start = 0; start < count; start += BATCH_VISITS) {
      const end = Math.min(start + BATCH_VISITS, count);
      const visits: VisitRecord[] = [];
      const visitors: number[] = [];
      for (let at = start; at < end; at++) {
        const i = order[at]!;
        const visitedAt = times[i]!;
        const agent = agents[i];
        const { browser, os, device, bot } = this.classifier.classify(agent);
        const referer = referers[i];
        let host = referer === undefined ? null : hosts.get(referer);
        if (host === undefined) hosts.set(referer!, (host = referrerHost(referer)));
        visits.push({
          urlId: ids[i]!,
          visitedAt,
          referrerHost: host,
          browser,
          os,
          device,
          bot,
          country: countryCode(countries[i]),
        });
        visitors.push(hashOf(dayOf(visitedAt), addresses[i], agent));
      }
      this.held.push({ id: randomUUID(), visits, visitors });
      if (end < count) await nextTurn();
    }
  }

  /** The captured visits, the buffer's arrays empty again. */
  private take() {
    const { ids, times, agents, referers, countries, addresses } = this;
    this.ids = [];
    this.times = [];
    this.agents = [];
    this.referers = [];
    this.countries = [];
    this.addresses = [];
    this.strings = new Map();
    return { ids, times, agents, referers, countries, addresses };
  }

  /** `capture` back in front of what was captured since, as it was. */
  private putBack(capture: ReturnType<VisitBuffer['take']>): void {
    this.ids = capture.ids.concat(this.ids);
    this.times = capture.times.concat(this.times);
    this.agents = capture.agents.concat(this.agents);
    this.referers = capture.referers.concat(this.referers);
    this.countries = capture.countries.concat(this.countries);
    this.addresses = capture.addresses.concat(this.addresses);
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

/** The indices of `ids` by id, each id's in their order (a bucket per id: cheaper than a sort of them all). */
function byLink(ids: readonly number[]): number[] {
  const buckets = new Map<number, number[]>();
  for (let i = 0; i < ids.length; i++) {
    const bucket = buckets.get(ids[i]!);
    if (bucket) bucket.push(i);
    else buckets.set(ids[i]!, [i]);
  }
  const order: number[] = [];
  for (const id of [...buckets.keys()].sort((a, b) => a - b)) for (const i of buckets.get(id)!) order.push(i);
  return order;
}

/**
 * The visitor hash of a capture's visits: a visitor seen again in the capture is hashed once
 * (SHA-256 is most of a visit's CPU when a few visitors follow many links), looked up by day, then
 * address, then User-Agent (no key string built a visit). The maps go with the capture, so no
 * address outlives it.
 */
function visitorHashes(salts: ReadonlyMap<number, string>) {
  const known = new Map<number, Map<string, Map<string, number>>>();
  return (day: number, address: string | undefined, agent: string | undefined): number => {
    let byAddress = known.get(day);
    if (byAddress === undefined) known.set(day, (byAddress = new Map()));
    let byAgent = byAddress.get(address ?? '');
    if (byAgent === undefined) byAddress.set(address ?? '', (byAgent = new Map()));
    let hash = byAgent.get(agent ?? '');
    if (hash === undefined) byAgent.set(agent ?? '', (hash = visitorHash(salts.get(day)!, address, agent)));
    return hash;
  };
}

/** 48 bits of SHA-256(salt, address, User-Agent): a visitor of one day, unrecognisable once the salt is gone. */
export function visitorHash(salt: string, address: string | undefined, userAgent: string | undefined): number {
  return createHash('sha256')
    .update(`${salt}\u0000${address ?? ''}\u0000${userAgent ?? ''}`)
    .digest()
    .readUIntBE(0, 6);
}
