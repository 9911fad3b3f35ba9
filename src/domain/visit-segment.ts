import { type DeviceClass, dayOf, hourOf, type VisitDimension, type VisitRecord } from './visit.js';
import {
  addValues,
  mergePackedSketch,
  packRegisters,
  registerIndex,
  registerRank,
  type VisitDay,
} from './visit-day.js';

/**
 * How visits are stored (issue 15): not a row each, but one row per mapping, UTC day and flush
 * batch, a "segment", holding those visits column by column. A visit row cost ~3 µs to insert
 * with its index and its share of the commit, most of what recording a visit cost; a segment of
 * tens of visits costs one row. Its text (JSON) holds:
 *
 * - `t`: the visits' times, the first as an offset from the segment's `first_ms`, each next one
 *   as an offset from the one before (ascending);
 * - `s`: the distinct strings of the segment's fields; `g`: the distinct combinations of a
 *   visit's fields, six numbers each: the referrer host, country, browser, OS and device class
 *   as 1 + their index in `s` (0: none), and 1 for a bot (else 0); `i`: for each visit, the index
 *   of its combination in `g`. A link's visits of half a second mostly share a few combinations,
 *   so a visit costs its time and one small number (segments written before this held `f`, the
 *   six numbers of each visit, instead of `g` and `i`: both are read);
 * - `u`: the segment's own HyperLogLog registers of its visitors (packed as the day rows' are),
 *   what folding it into its day row adds to the day's sketch. The visitors' hashes themselves
 *   are not kept.
 *
 * A visit is known by `segment id × SEGMENT_VISITS + its index`, ascending with time within a
 * segment, which is what the visits API pages by.
 */
export interface VisitSegmentRow {
  readonly url_id: number;
  readonly day: number;
  readonly first_ms: number;
  readonly last_ms: number;
  readonly visits: number;
  readonly data: string;
}

/** At most this many visits a segment (ids are `segment id × SEGMENT_VISITS + index`). */
export const SEGMENT_VISITS = 1024;
/**
 * At most this long from a segment's first visit to its last: a page of visits before an
 * instant reads the segments ending within this much after it, not all newer ones.
 */
export const SEGMENT_SPAN_MS = 60_000;

interface SegmentText {
  t: number[];
  s: string[];
  /** The fields' combinations, six numbers each, and each visit's combination (by index). */
  g?: number[];
  i?: number[];
  /** Before `g` and `i`: six numbers per visit. */
  f?: number[];
  u: string;
}

/** Numbers per combination of fields (and per visit in the older `f`). */
const FIELDS = 6;
/** Distinct strings a segment searches for a value before it keeps an index of them. */
const SEARCHED_STRINGS = 8;

/** What a visit's combination of fields is made of: a visit without its mapping and time. */
export type VisitFields = Omit<VisitRecord, 'urlId' | 'visitedAt'>;

/**
 * One segment being built: the visits of one mapping and day, in time order. A visit's fields are
 * looked up by the object that holds them first (the visit buffer hands each distinct combination
 * of a capture over as one object), then by value: a segment's visits mostly repeat a few.
 */
export class SegmentBuilder {
  private readonly offsets: number[] = [];
  private readonly strings: string[] = [];
  /** The strings' codes (made once there are more than a few: until then `strings` is searched). */
  private index: Map<string, number> | undefined;
  /** The distinct combinations of fields (FIELDS numbers each), and each visit's by index. */
  private readonly combinations: number[] = [];
  /** Combinations by their numbers (made on the second combination). */
  private combinationIndex: Map<string, number> | undefined;
  /** Combinations by the object their fields came in (made on the second distinct object). */
  private byObject: Map<VisitFields, number> | undefined;
  private readonly visitCombinations: number[] = [];
  /** The last visit's fields and combination (-1: none yet): consecutive visits mostly repeat them. */
  private lastFields: VisitFields | undefined;
  private lastCombination = -1;
  /** The segment's non-zero registers, index → rank (most segments have a few visitors). */
  private readonly registers = new Map<number, number>();
  /** The last visitor added (-1: none): repeats change no register. */
  private lastVisitor = -1;
  private last: number;
  count = 0;

  constructor(
    readonly urlId: number,
    readonly day: number,
    readonly first: number,
  ) {
    this.last = first;
  }

  /** Whether a visit of this segment's mapping at `visitedAt` (not before the last one) belongs to it. */
  fits(visitedAt: number): boolean {
    return (
      visitedAt >= this.last &&
      visitedAt - this.first <= SEGMENT_SPAN_MS &&
      dayOf(visitedAt) === this.day &&
      this.count < SEGMENT_VISITS
    );
  }

  add(visitedAt: number, fields: VisitFields): void {
    this.offsets.push(visitedAt - this.last);
    this.last = visitedAt;
    if (fields !== this.lastFields) {
      this.lastCombination = this.combinationOf(fields);
      this.lastFields = fields;
    }
    this.visitCombinations.push(this.lastCombination);
    this.count++;
  }

  addVisitor(hash: number): void {
    if (hash === this.lastVisitor) return;
    this.lastVisitor = hash;
    this.addRegister(registerIndex(hash), registerRank(hash));
  }

  /** Raises register `index` to `rank` (a visitor as the visit journal keeps it: its register only). */
  addRegister(index: number, rank: number): void {
    if (rank > (this.registers.get(index) ?? 0)) this.registers.set(index, rank);
  }

  row(): VisitSegmentRow {
    const text: SegmentText = {
      t: this.offsets,
      s: this.strings,
      g: this.combinations,
      i: this.visitCombinations,
      u: packRegisters(this.registers).toString('base64'),
    };
    return {
      url_id: this.urlId,
      day: this.day,
      first_ms: this.first,
      last_ms: this.last,
      visits: this.count,
      data: JSON.stringify(text),
    };
  }

  private combinationOf(fields: VisitFields): number {
    const known = this.byObject?.get(fields);
    if (known !== undefined) return known;
    const r = this.code(fields.referrerHost);
    const c = this.code(fields.country);
    const b = this.code(fields.browser);
    const o = this.code(fields.os);
    const d = this.code(fields.device);
    const bot = fields.bot ? 1 : 0;
    const g = this.combinations;
    let index: number | undefined;
    if (g.length === 0) {
      index = 0;
      g.push(r, c, b, o, d, bot);
    } else {
      const keyOf = (at: number) => `${g[at]},${g[at + 1]},${g[at + 2]},${g[at + 3]},${g[at + 4]},${g[at + 5]}`;
      this.combinationIndex ??= new Map([[keyOf(0), 0]]);
      const key = `${r},${c},${b},${o},${d},${bot}`;
      index = this.combinationIndex.get(key);
      if (index === undefined) {
        index = g.length / FIELDS;
        g.push(r, c, b, o, d, bot);
        this.combinationIndex.set(key, index);
      }
      if (this.lastFields !== undefined) this.byObject ??= new Map([[this.lastFields, this.lastCombination]]);
      this.byObject?.set(fields, index);
    }
    return index;
  }

  private code(value: string | null): number {
    if (value === null) return 0;
    const strings = this.strings;
    if (this.index === undefined) {
      const at = strings.indexOf(value);
      if (at >= 0) return at + 1;
      strings.push(value);
      if (strings.length > SEARCHED_STRINGS) this.index = new Map(strings.map((s, i) => [s, i + 1]));
      return strings.length;
    }
    let code = this.index.get(value);
    if (code === undefined) {
      strings.push(value);
      this.index.set(value, (code = strings.length));
    }
    return code;
  }
}

/**
 * The segments of a batch: its visits by mapping, then time (a mapping's visits of one day, at
 * most SEGMENT_SPAN_MS and SEGMENT_VISITS apart, in one segment), each with its visitors'
 * registers (`visitors[i]`: the hash of `visits[i]`'s visitor, where given).
 */
export function segmentsOf(visits: readonly VisitRecord[], visitors: readonly number[] = []): VisitSegmentRow[] {
  const order = Array.from({ length: visits.length }, (_, i) => i);
  const before = (a: number, b: number) =>
    visits[a]!.urlId - visits[b]!.urlId || visits[a]!.visitedAt - visits[b]!.visitedAt || a - b;
  if (!order.every((i) => i === 0 || before(i - 1, i) < 0)) order.sort(before);
  const segments: VisitSegmentRow[] = [];
  let open: SegmentBuilder | undefined;
  for (const i of order) {
    const v = visits[i]!;
    if (open?.urlId !== v.urlId || !open.fits(v.visitedAt)) {
      if (open) segments.push(open.row());
      open = new SegmentBuilder(v.urlId, dayOf(v.visitedAt), v.visitedAt);
    }
    open.add(v.visitedAt, v);
    const hash = visitors[i];
    if (hash !== undefined) open.addVisitor(hash);
  }
  if (open) segments.push(open.row());
  return segments;
}

/** A segment's visits, in time order (index i is visit `id × SEGMENT_VISITS + i`). */
export function decodeSegment(urlId: number, firstMs: number, data: string): VisitRecord[] {
  return visitsOf(urlId, firstMs, JSON.parse(data) as SegmentText);
}

/**
 * The segment's combinations of fields (six numbers each) and visit `v`'s among them: `g` and
 * `i`, or (older segments) `f`, where each visit has a combination of its own.
 */
function combinationsOf(text: SegmentText): { fields: number[]; of: (v: number) => number } {
  if (text.g !== undefined && text.i !== undefined) {
    const { g, i } = text;
    return { fields: g, of: (v) => i[v]! };
  }
  return { fields: text.f ?? [], of: (v) => v };
}

function visitsOf(urlId: number, firstMs: number, text: SegmentText): VisitRecord[] {
  const { t, s } = text;
  const { fields: f, of } = combinationsOf(text);
  const visits: VisitRecord[] = new Array(t.length);
  let time = firstMs;
  for (let i = 0; i < t.length; i++) {
    time += t[i]!;
    visits[i] = { urlId, visitedAt: time, ...combinationAt(f, of(i) * FIELDS, s) };
  }
  return visits;
}

/**
 * The fields of the combination whose six numbers start at `numbers[at]` (referrer host, country,
 * browser, OS and device as 1 + their index in `strings`, 0 none; 1 for a bot), as segments and
 * journal rows store them.
 */
export function combinationAt(numbers: readonly number[], at: number, strings: readonly string[]): VisitFields {
  const value = (code: number) => (code === 0 ? null : strings[code - 1]!);
  return {
    referrerHost: value(numbers[at]!),
    country: value(numbers[at + 1]!),
    browser: value(numbers[at + 2]!),
    os: value(numbers[at + 3]!),
    device: (value(numbers[at + 4]!) ?? 'other') as DeviceClass,
    bot: numbers[at + 5] === 1,
  };
}

/**
 * Adds a segment's visits and visitors to `day` (its day row, or what a fold adds to it), counted
 * from its columns: each distinct value once, not a visit object each.
 */
export function addSegment(day: VisitDay, firstMs: number, data: string): void {
  const text = JSON.parse(data) as SegmentText;
  const { t, s, u } = text;
  const { fields: f, of } = combinationsOf(text);
  // Visits per combination, then per field, visits per code (0: none; 1 + index in `s`).
  const perCombination = new Array<number>(f.length / FIELDS).fill(0);
  let time = firstMs;
  for (let i = 0; i < t.length; i++) {
    time += t[i]!;
    const hour = hourOf(time) % 24;
    const combination = of(i);
    day.hours[hour]!++;
    if (f[combination * FIELDS + 5] === 1) day.bots[hour]!++;
    perCombination[combination]!++;
  }
  const counts = FIELD_DIMENSIONS.map(() => new Array<number>(s.length + 1).fill(0));
  perCombination.forEach((visits, combination) => {
    for (let field = 0; field < 5; field++) counts[field]![f[combination * FIELDS + field]!]! += visits;
  });
  FIELD_DIMENSIONS.forEach((dimension, field) => {
    const byCode = counts[field]!;
    for (let code = 0; code < byCode.length; code++) {
      const visits = byCode[code]!;
      if (visits > 0)
        addValues(day.values[dimension], code === 0 ? (dimension === 'device' ? 'other' : '') : s[code - 1]!, visits);
    }
  });
  mergePackedSketch(day.sketch, Buffer.from(u, 'base64'));
}

/** The dimensions of the five coded fields, in their order in a combination. */
const FIELD_DIMENSIONS: readonly VisitDimension[] = ['referrer', 'country', 'browser', 'os', 'device'];
