import { type DeviceClass, dayOf, hourOf, type VisitDimension, type VisitRecord } from './visit.js';
import { addValues, mergePackedSketch, packRegisters, register, type VisitDay } from './visit-day.js';

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

/** One segment being built: the visits of one mapping and day, in time order. */
class SegmentBuilder {
  private readonly offsets: number[] = [];
  private readonly strings: string[] = [];
  private readonly index = new Map<string, number>();
  /** The distinct combinations of fields (FIELDS numbers each), and each visit's by index. */
  private readonly combinations: number[] = [];
  private readonly combinationIndex = new Map<string, number>();
  private readonly visitCombinations: number[] = [];
  /** The last visit's combination (-1: none yet): consecutive visits mostly repeat it. */
  private lastCombination = -1;
  /** The segment's non-zero registers, index → rank (most segments have a few visitors). */
  private readonly registers = new Map<number, number>();
  private last: number;
  count = 0;

  constructor(
    readonly urlId: number,
    readonly day: number,
    readonly first: number,
  ) {
    this.last = first;
  }

  fits(v: VisitRecord): boolean {
    return (
      v.urlId === this.urlId &&
      dayOf(v.visitedAt) === this.day &&
      v.visitedAt >= this.last &&
      v.visitedAt - this.first <= SEGMENT_SPAN_MS &&
      this.count < SEGMENT_VISITS
    );
  }

  add(v: VisitRecord): void {
    this.offsets.push(v.visitedAt - this.last);
    this.last = v.visitedAt;
    const r = this.code(v.referrerHost);
    const c = this.code(v.country);
    const b = this.code(v.browser);
    const o = this.code(v.os);
    const d = this.code(v.device);
    const bot = v.bot ? 1 : 0;
    const g = this.combinations;
    const last = this.lastCombination * FIELDS;
    const repeated =
      this.lastCombination >= 0 &&
      g[last] === r &&
      g[last + 1] === c &&
      g[last + 2] === b &&
      g[last + 3] === o &&
      g[last + 4] === d &&
      g[last + 5] === bot;
    if (!repeated) {
      const key = `${r},${c},${b},${o},${d},${bot}`;
      let index = this.combinationIndex.get(key);
      if (index === undefined) {
        index = g.length / FIELDS;
        g.push(r, c, b, o, d, bot);
        this.combinationIndex.set(key, index);
      }
      this.lastCombination = index;
    }
    this.visitCombinations.push(this.lastCombination);
    this.count++;
  }

  addVisitor(hash: number): void {
    const [index, rank] = register(hash);
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

  private code(value: string | null): number {
    if (value === null) return 0;
    let code = this.index.get(value);
    if (code === undefined) {
      this.strings.push(value);
      this.index.set(value, (code = this.strings.length));
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
  // The visit buffer hands them over in this order already: checking is cheaper than sorting.
  if (!order.every((i) => i === 0 || before(i - 1, i) < 0)) order.sort(before);
  const segments: VisitSegmentRow[] = [];
  let open: SegmentBuilder | undefined;
  for (const i of order) {
    const v = visits[i]!;
    if (!open?.fits(v)) {
      if (open) segments.push(open.row());
      open = new SegmentBuilder(v.urlId, dayOf(v.visitedAt), v.visitedAt);
    }
    open.add(v);
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
  const value = (code: number) => (code === 0 ? null : s[code - 1]!);
  const visits: VisitRecord[] = new Array(t.length);
  let time = firstMs;
  for (let i = 0; i < t.length; i++) {
    time += t[i]!;
    const at = of(i) * FIELDS;
    visits[i] = {
      urlId,
      visitedAt: time,
      referrerHost: value(f[at]!),
      country: value(f[at + 1]!),
      browser: value(f[at + 2]!),
      os: value(f[at + 3]!),
      device: (value(f[at + 4]!) ?? 'other') as DeviceClass,
      bot: f[at + 5] === 1,
    };
  }
  return visits;
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
