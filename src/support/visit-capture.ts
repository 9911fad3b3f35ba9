import { createHash } from 'node:crypto';
import { countryCode, dayOf, referrerHost } from '../domain/visit.js';
import { registerIndex, registerRank } from '../domain/visit-day.js';
import { type JournalVisits, registerCode } from '../domain/visit-journal.js';
import type { VisitFields } from '../domain/visit-segment.js';
import type { UserAgentClassifier } from './user-agents.js';

/** Visits a capture has room for at first (it doubles as it fills). */
const INITIAL_CAPACITY = 4_096;

/**
 * The visits captured on the redirect path since the last flush, column by column, numbers only,
 * in typed arrays: each header value and address is kept once, in `values`, and a visit holds its
 * id there (1 + index; 0: none). The redirect then leaves no string of its own behind (a request's
 * header strings die young with it), and the columns live outside the collected heap: a young
 * collection neither traces nor copies them, as it did the arrays of a flush interval's visits
 * (their growing copies survived a collection or two each). The flush works out each distinct
 * value once, not once a visit. The columns' entries from `length` on are unused.
 *
 * A capture is emptied with `clear()` and used again (the visit buffer keeps two), so that its
 * columns are not new memory every flush interval: columns outlive young collections and are
 * freed only by a full one, and a few MB of them a second brought full collections on sooner.
 */
export class VisitCapture {
  urlIds = new Float64Array(INITIAL_CAPACITY);
  times = new Float64Array(INITIAL_CAPACITY);
  agents = new Int32Array(INITIAL_CAPACITY);
  referers = new Int32Array(INITIAL_CAPACITY);
  countries = new Int32Array(INITIAL_CAPACITY);
  addresses = new Int32Array(INITIAL_CAPACITY);
  /** The distinct header values and addresses, by id − 1. */
  readonly values: string[] = [];
  private readonly ids = new Map<string, number>();
  private count = 0;

  get length(): number {
    return this.count;
  }

  /**
   * Empties the capture, its strings (addresses, `User-Agent`s) included. Its columns keep their
   * room for the next interval's visits, unless it held under a quarter of it: a burst's room is
   * given back.
   */
  clear(): void {
    const capacity = this.urlIds.length;
    if (capacity > INITIAL_CAPACITY && this.count * 4 < capacity) this.resize(capacity / 2, 0);
    this.values.length = 0;
    this.ids.clear();
    this.count = 0;
  }

  add(
    urlId: number,
    time: number,
    agent: string | undefined,
    referer: string | undefined,
    country: string | undefined,
    address: string | undefined,
  ): void {
    const at = this.count;
    if (at === this.urlIds.length) this.grow();
    this.urlIds[at] = urlId;
    this.times[at] = time;
    this.agents[at] = this.id(agent);
    this.referers[at] = this.id(referer);
    this.countries[at] = this.id(country);
    this.addresses[at] = this.id(address);
    this.count = at + 1;
  }

  /** The days the capture's visits fall on (ascending). */
  days(): number[] {
    const days = new Set<number>();
    let last = NaN;
    for (let i = 0; i < this.count; i++) {
      const day = dayOf(this.times[i]!);
      if (day !== last) days.add((last = day));
    }
    return [...days].sort((a, b) => a - b);
  }

  private grow(): void {
    this.resize(this.urlIds.length * 2, this.count);
  }

  /** New columns of `capacity` visits, the first `keep` of each copied over. */
  private resize(capacity: number, keep: number): void {
    const resized = <T extends Float64Array | Int32Array>(column: T): T => {
      const copy = new (column.constructor as new (length: number) => T)(capacity);
      if (keep > 0) copy.set(column.subarray(0, keep));
      return copy;
    };
    this.urlIds = resized(this.urlIds);
    this.times = resized(this.times);
    this.agents = resized(this.agents);
    this.referers = resized(this.referers);
    this.countries = resized(this.countries);
    this.addresses = resized(this.addresses);
  }

  private id(value: string | undefined): number {
    if (value === undefined) return 0;
    let id = this.ids.get(value);
    if (id === undefined) {
      this.values.push(value);
      this.ids.set(value, (id = this.values.length));
    }
    return id;
  }
}

/**
 * A capture's visits prepared for the visit journal (src/domain/visit-journal.ts), by mapping and
 * then time, a few thousand visits at a time (`take`) so that the caller can let the event loop in
 * between. The visits are put in mapping order by counting (typed arrays: nothing for the
 * collector to trace). A visit's fields are worked out once a distinct combination of its
 * `User-Agent`, `Referer` and country header; its visitor is hashed once a visitor and day, and
 * only the register the hash raises is kept. Nothing here keeps an address or a `User-Agent`:
 * they go with the capture.
 */
export class CaptureJournal {
  private readonly order: Int32Array;
  /** The capture's mappings by id, and where each one's visits start in `order` (one more: the end). */
  private readonly ids: Float64Array;
  private readonly starts: Int32Array;
  private readonly fieldsTable: FieldsTable;
  private readonly visitors: VisitorTable;
  /** The prepared columns, in `order`'s order, and the combinations of fields by their object. */
  private readonly times: Float64Array;
  private readonly combinations: Int32Array;
  private readonly registers: Int32Array;
  private readonly fields: VisitFields[] = [];
  private readonly fieldIndex = new Map<VisitFields, number>();
  /** Where `take` goes on: the mapping (its rank in `ids`) and the visit (in `order`). */
  private rank = 0;
  private at = 0;

  constructor(
    private readonly capture: VisitCapture,
    salts: ReadonlyMap<number, string>,
    classifier: UserAgentClassifier,
  ) {
    ({ order: this.order, ids: this.ids, starts: this.starts } = byMapping(capture.urlIds, capture.length));
    this.fieldsTable = new FieldsTable(capture.values, classifier);
    this.visitors = new VisitorTable(capture.values, salts);
    this.times = new Float64Array(capture.length);
    this.combinations = new Int32Array(capture.length);
    this.registers = new Int32Array(capture.length);
  }

  get done(): boolean {
    return this.rank >= this.ids.length;
  }

  /** Prepares about `visits` more visits. */
  take(visits: number): void {
    const { order, ids, starts, capture } = this;
    const { times, agents, referers, countries, addresses } = capture;
    for (let left = visits; left > 0 && this.rank < ids.length;) {
      const end = starts[this.rank + 1]!;
      if (this.at === starts[this.rank]) inTimeOrder(order, this.at, end, times);
      for (; this.at < end && left > 0; this.at++, left--) {
        const i = order[this.at]!;
        const time = times[i]!;
        const agent = agents[i]!;
        const fields = this.fieldsTable.of(agent, referers[i]!, countries[i]!);
        let combination = this.fieldIndex.get(fields);
        if (combination === undefined) this.fieldIndex.set(fields, (combination = this.fields.push(fields) - 1));
        const hash = this.visitors.of(dayOf(time), addresses[i]!, agent);
        this.times[this.at] = time;
        this.combinations[this.at] = combination;
        this.registers[this.at] = registerCode(registerIndex(hash), registerRank(hash));
      }
      if (this.at === end) this.rank++;
    }
  }

  /** The prepared visits (once `done`). */
  visits(): JournalVisits {
    return {
      links: this.ids,
      starts: this.starts,
      times: this.times,
      fields: this.fields,
      combinations: this.combinations,
      registers: this.registers,
    };
  }
}

/**
 * The visits of `urlIds` by mapping (a counting sort: each mapping's in their order), the
 * mappings by id, and where each one's visits start in that order.
 */
function byMapping(urlIds: Float64Array, count: number): { order: Int32Array; ids: Float64Array; starts: Int32Array } {
  // Each visit's mapping, numbered as they come, and each mapping's visits.
  const linkOf = new Int32Array(count);
  const numberOf = new Map<number, number>();
  const links: number[] = [];
  const visitsOf: number[] = [];
  for (let i = 0; i < count; i++) {
    const urlId = urlIds[i]!;
    let link = numberOf.get(urlId);
    if (link === undefined) {
      numberOf.set(urlId, (link = links.length));
      links.push(urlId);
      visitsOf.push(0);
    }
    linkOf[i] = link;
    visitsOf[link]!++;
  }
  const ids = Float64Array.from(links).sort();
  const rankOf = new Int32Array(links.length);
  const starts = new Int32Array(links.length + 1);
  for (let rank = 0; rank < ids.length; rank++) {
    const link = numberOf.get(ids[rank]!)!;
    rankOf[link] = rank;
    starts[rank + 1] = starts[rank]! + visitsOf[link]!;
  }
  const order = new Int32Array(count);
  const next = starts.slice(0, links.length);
  for (let i = 0; i < count; i++) order[next[rankOf[linkOf[i]!]!]!++] = i;
  return { order, ids, starts };
}

/**
 * Puts `order[from..to)` (visits of one mapping, in capture order) in time order: the capture's
 * order is time's unless the clock went back while capturing, when a segment would otherwise
 * end early at every step back (times not ascending) and overlap the next one.
 */
function inTimeOrder(order: Int32Array, from: number, to: number, times: Float64Array): void {
  for (let at = from + 1; at < to; at++) {
    if (times[order[at - 1]!]! > times[order[at]!]!) {
      order.subarray(from, to).sort((a, b) => times[a]! - times[b]! || a - b);
      return;
    }
  }
}

/**
 * A visit's fields by the ids of its `User-Agent`, `Referer` and country header: one object per
 * distinct combination of the three, the `User-Agent` classified once, the referrer cut to its
 * host once. The last combination asked for is answered without a lookup (a visit's neighbours in
 * time mostly come from the same client).
 */
class FieldsTable {
  private readonly byAgent = new Map<number, Map<number, Map<number, VisitFields>>>();
  private readonly hosts = new Map<number, string | null>();
  private lastAgent = -1;
  private lastReferer = -1;
  private lastCountry = -1;
  private last: VisitFields | undefined;

  constructor(
    private readonly values: readonly string[],
    private readonly classifier: UserAgentClassifier,
  ) {}

  of(agent: number, referer: number, country: number): VisitFields {
    if (agent === this.lastAgent && referer === this.lastReferer && country === this.lastCountry) return this.last!;
    // Nested by id (small integers: keys that need no boxing, unlike one number made of three).
    const byReferer = getOrAdd(this.byAgent, agent, newMap<number, Map<number, VisitFields>>);
    const byCountry = getOrAdd(byReferer, referer, newMap<number, VisitFields>);
    let fields = byCountry.get(country);
    if (fields === undefined) byCountry.set(country, (fields = this.fieldsOf(agent, referer, country)));
    this.lastAgent = agent;
    this.lastReferer = referer;
    this.lastCountry = country;
    return (this.last = fields);
  }

  private fieldsOf(agent: number, referer: number, country: number): VisitFields {
    const { browser, os, device, bot } = this.classifier.classify(captured(this.values, agent));
    let host = this.hosts.get(referer);
    if (host === undefined) this.hosts.set(referer, (host = referrerHost(captured(this.values, referer))));
    return { referrerHost: host, country: countryCode(captured(this.values, country)), browser, os, device, bot };
  }
}

/**
 * The visitor hash of a capture's visits: a visitor (day, address, `User-Agent`) seen again in
 * the capture is hashed once (SHA-256 is most of a visit's CPU when a few visitors follow many
 * links), and the last one asked for is answered without a lookup. The table goes with the
 * capture, so no address outlives it.
 */
class VisitorTable {
  private readonly known = new Map<number, Map<number, Map<number, number>>>();
  private lastDay = -1;
  private lastAddress = -1;
  private lastAgent = -1;
  private last = 0;

  constructor(
    private readonly values: readonly string[],
    private readonly salts: ReadonlyMap<number, string>,
  ) {}

  of(day: number, address: number, agent: number): number {
    if (day === this.lastDay && address === this.lastAddress && agent === this.lastAgent) return this.last;
    const byAddress = getOrAdd(this.known, day, newMap<number, Map<number, number>>);
    const byAgent = getOrAdd(byAddress, address, newMap<number, number>);
    let hash = byAgent.get(agent);
    if (hash === undefined) {
      const salt = this.salts.get(day)!;
      byAgent.set(agent, (hash = visitorHash(salt, captured(this.values, address), captured(this.values, agent))));
    }
    this.lastDay = day;
    this.lastAddress = address;
    this.lastAgent = agent;
    return (this.last = hash);
  }
}

const newMap = <K, V>() => new Map<K, V>();

/** The capture's value of id `id` (0: none). */
const captured = (values: readonly string[], id: number) => (id === 0 ? undefined : values[id - 1]);

function getOrAdd<K, V>(map: Map<K, V>, key: K, make: () => V): V {
  let value = map.get(key);
  if (value === undefined) map.set(key, (value = make()));
  return value;
}

/** 48 bits of SHA-256(salt, address, User-Agent): a visitor of one day, unrecognisable once the salt is gone. */
export function visitorHash(salt: string, address: string | undefined, userAgent: string | undefined): number {
  return createHash('sha256')
    .update(`${salt}\u0000${address ?? ''}\u0000${userAgent ?? ''}`)
    .digest()
    .readUIntBE(0, 6);
}
