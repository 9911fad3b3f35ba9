import { dayOf } from './visit.js';
import { combinationAt, SegmentBuilder, type VisitFields, type VisitSegmentRow } from './visit-segment.js';

/**
 * A flush's visits as the visit journal holds them (one row a flush), prepared: fields worked out
 * and each visitor reduced to the HyperLogLog register it raises, the address and `User-Agent`
 * gone. Merged into segments (src/domain/visit-segment.ts) every few seconds, a link's visits of
 * several flushes in one segment: over many links a segment of a flush held a visit or two, a row
 * each, which was most of what recording a visit cost PostgreSQL (bench/PROFILE.md).
 *
 * In memory: the links in ascending order and where each one's visits start (one more: the end),
 * then a column per visit, a link's visits in time order. Decoded, every column is a typed array:
 * a merge holds a row's visits over several turns of the event loop, and numbers in arrays of the
 * collected heap would outlive young collections into the old generation, whose full collections
 * are most of the redirect's p99 (bench/PROFILE.md); a typed array's numbers are outside it.
 */
export interface JournalVisits {
  readonly links: ArrayLike<number>;
  readonly starts: ArrayLike<number>;
  readonly times: ArrayLike<number>;
  /** The distinct combinations of fields, and each visit's by index. */
  readonly fields: readonly VisitFields[];
  readonly combinations: ArrayLike<number>;
  /** Each visit's register, `registerCode(index, rank)`. */
  readonly registers: ArrayLike<number>;
}

/**
 * The journal row's text (JSON): `s` the distinct strings, `g` the combinations (six numbers each:
 * referrer host, country, browser, OS and device as 1 + their index in `s`, 0 none; 1 for a bot),
 * `l` each link as the difference from the one before and `n` its visits, `f` the first visit's
 * time and `t` each visit's as the difference from the visit before, `i` each visit's combination,
 * `r` its register. About a tenth of the flush's segments as text.
 */
interface JournalText {
  s: string[];
  g: number[];
  l: number[];
  n: number[];
  f: number;
  t: number[];
  i: number[];
  r: number[];
}

const FIELDS = 6;
const RANKS = 64;

/** A visitor's register as one number (the rank is at most 40, with 48 bits a hash). */
export const registerCode = (index: number, rank: number) => index * RANKS + rank;

export function encodeJournal(visits: JournalVisits): string {
  const strings: string[] = [];
  const codes = new Map<string, number>();
  const code = (value: string | null) => {
    if (value === null) return 0;
    let known = codes.get(value);
    if (known === undefined) codes.set(value, (known = strings.push(value)));
    return known;
  };
  const g: number[] = [];
  for (const f of visits.fields) {
    g.push(code(f.referrerHost), code(f.country), code(f.browser), code(f.os), code(f.device), f.bot ? 1 : 0);
  }
  const { links, starts, times } = visits;
  const count = starts[links.length] ?? 0;
  const t = new Array<number>(count);
  for (let v = 0; v < count; v++) t[v] = v === 0 ? 0 : times[v]! - times[v - 1]!;
  const l = new Array<number>(links.length);
  const n = new Array<number>(links.length);
  for (let k = 0; k < links.length; k++) {
    l[k] = links[k]! - (k === 0 ? 0 : links[k - 1]!);
    n[k] = starts[k + 1]! - starts[k]!;
  }
  const text: JournalText = {
    s: strings,
    g,
    l,
    n,
    f: count === 0 ? 0 : times[0]!,
    t,
    i: Array.from(visits.combinations),
    r: Array.from(visits.registers),
  };
  return JSON.stringify(text);
}

export function decodeJournal(data: string): JournalVisits {
  const text = JSON.parse(data) as JournalText;
  const fields: VisitFields[] = [];
  for (let at = 0; at < text.g.length; at += FIELDS) fields.push(combinationAt(text.g, at, text.s));
  const links = new Float64Array(text.l.length);
  const starts = new Int32Array(text.l.length + 1);
  let link = 0;
  for (let k = 0; k < text.l.length; k++) {
    links[k] = link += text.l[k]!;
    starts[k + 1] = starts[k]! + text.n[k]!;
  }
  const times = new Float64Array(text.t.length);
  let time = text.f;
  for (let v = 0; v < text.t.length; v++) times[v] = time += text.t[v]!;
  return { links, starts, times, fields, combinations: Int32Array.from(text.i), registers: Int32Array.from(text.r) };
}

/** A journal row to merge: its visits, and the link it is merged through already (0: none). */
export interface JournalPart {
  readonly visits: JournalVisits;
  readonly mergedThrough: number;
}

/** A transaction's worth of a merge: segments, the visits they hold, and the last link they are of. */
export interface MergeGroup {
  readonly rows: VisitSegmentRow[];
  readonly visits: number;
  readonly through: number;
}

/**
 * The segments of several journal rows together, link by link in ascending order, in groups of
 * about `limit.rows` segments or `limit.visits` visits ending at a link's last segment (`take`,
 * a group at a time, so that each can be a transaction of its own). A link's visits are taken from
 * the rows in their order (the flushes'), so its segment of a few seconds holds the visits of all
 * of them; a row's links up to its `mergedThrough` are left out (merged before).
 */
export class JournalMerge {
  /** Each part's next link (its rank in `links`). */
  private readonly next: number[];

  constructor(
    private readonly parts: readonly JournalPart[],
    private readonly limit: { readonly rows: number; readonly visits: number },
  ) {
    this.next = parts.map(({ visits, mergedThrough }) => {
      let rank = 0;
      while (rank < visits.links.length && visits.links[rank]! <= mergedThrough) rank++;
      return rank;
    });
  }

  /** The next group (of `limit`, the merge's own unless given), undefined once every link is merged. */
  take(limit: { readonly rows: number; readonly visits: number } = this.limit): MergeGroup | undefined {
    const rows: VisitSegmentRow[] = [];
    let visits = 0;
    let through: number | undefined;
    while (rows.length < limit.rows && visits < limit.visits) {
      const link = this.nextLink();
      if (link === undefined) break;
      visits += this.mergeLink(link, rows);
      through = link;
    }
    return through === undefined ? undefined : { rows, visits, through };
  }

  private nextLink(): number | undefined {
    let least: number | undefined;
    this.parts.forEach(({ visits }, p) => {
      const link = visits.links[this.next[p]!];
      if (link !== undefined && (least === undefined || link < least)) least = link;
    });
    return least;
  }

  /**
   * The segments of `link`'s visits in every part that has it, in time order, into `rows`. The
   * parts' visits of a link mostly follow each other in time (flushes of one instance); where they
   * do not (instances' flushes interleaved), they are merged by time, so that a link still has one
   * segment a merge, not one at every step back in time.
   */
  private mergeLink(link: number, rows: VisitSegmentRow[]): number {
    const sources: { visits: JournalVisits; from: number; to: number }[] = [];
    this.parts.forEach(({ visits }, p) => {
      const rank = this.next[p]!;
      if (visits.links[rank] !== link) return;
      this.next[p] = rank + 1;
      sources.push({ visits, from: visits.starts[rank]!, to: visits.starts[rank + 1]! });
    });
    let open: SegmentBuilder | undefined;
    let count = 0;
    const add = (visits: JournalVisits, v: number) => {
      const time = visits.times[v]!;
      if (open !== undefined && !open.fits(time)) {
        rows.push(open.row());
        open = undefined;
      }
      open ??= new SegmentBuilder(link, dayOf(time), time);
      open.add(time, visits.fields[visits.combinations[v]!]!);
      const register = visits.registers[v]!;
      open.addRegister(Math.floor(register / RANKS), register % RANKS);
      count++;
    };
    // Each part's visits of the link are in time order: merged by time (one part's are taken as
    // they are), the earlier part's first at equal times, with nothing made a visit (a merge's
    // objects outlive young collections, see JournalVisits).
    const at = sources.map(({ from }) => from);
    for (;;) {
      let earliest = -1;
      let time = Infinity;
      for (let p = 0; p < sources.length; p++) {
        const { visits, to } = sources[p]!;
        const v = at[p]!;
        if (v < to && visits.times[v]! < time) {
          earliest = p;
          time = visits.times[v]!;
        }
      }
      if (earliest < 0) break;
      add(sources[earliest]!.visits, at[earliest]!++);
    }
    if (open !== undefined) rows.push((open as SegmentBuilder).row());
    return count;
  }
}
