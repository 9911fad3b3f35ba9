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
 * The first format of a journal row's text (JSON, read still: rows written before the binary one
 * below may wait in a journal an upgrade finds): `s` the distinct strings, `g` the combinations
 * (six numbers each: referrer host, country, browser, OS and device as 1 + their index in `s`, 0
 * none; 1 for a bot), `l` each link as the difference from the one before and `n` its visits, `f`
 * the first visit's time and `t` each visit's as the difference from the visit before, `i` each
 * visit's combination, `r` its register.
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

/**
 * The binary format (bytes: a BLOB in SQLite, base64 text in PostgreSQL's text column, by the
 * journal's adapter). Encoding and decoding it are copies of typed arrays, where the JSON's were
 * `JSON.stringify` and `JSON.parse` of arrays of a flush's numbers, 4 and 2 ms for 40,000 visits,
 * each holding the event loop in one piece every flush and every merged row, which a p99 of the
 * redirect's sees; and its bytes are outside the collected heap, where a row's text was a string
 * of hundreds of KB promoted at once, whose full collections the p99 sees too (bench/PROFILE.md).
 * Little-endian:
 *
 * - bytes 0-3: the version (2), then the byte widths of the times (2 or 4: milliseconds after the
 *   earliest visit; 8: each time as a float64, where those do not fit), of the combinations and of
 *   the registers (1, 2 or 4); 4-7: the length of the header's JSON in bytes; 8-11: the links;
 *   12-15: the visits; 16-23: the earliest visit's time (float64);
 * - the header's JSON, `{"s": [...], "g": [...]}` as in the first format (a few strings and
 *   combinations: a flush's distinct ones);
 * - the links (float64 each, ascending), each link's visits (uint32), and a column per visit: its
 *   time, its combination, its register, each column starting on a multiple of 8 bytes.
 */
const BINARY_VERSION = 2;
const HEADER_BYTES = 24;

/** The bytes a column of unsigned integers up to `max` takes a value. */
const widthFor = (max: number): 1 | 2 | 4 => (max < 2 ** 8 ? 1 : max < 2 ** 16 ? 2 : 4);
const align8 = (offset: number) => (offset + 7) & ~7;

/** Where each part of a binary row starts (each column on a multiple of 8 bytes), and its length. */
interface Layout {
  readonly links: number;
  readonly counts: number;
  readonly times: number;
  readonly combinations: number;
  readonly registers: number;
  readonly bytes: number;
}

/** The layout of a row of `linkCount` links and `count` visits, its header's JSON `headerLength` bytes. */
function layout(
  headerLength: number,
  linkCount: number,
  count: number,
  widths: { readonly time: number; readonly combination: number; readonly register: number },
): Layout {
  const links = align8(HEADER_BYTES + headerLength);
  const counts = align8(links + 8 * linkCount);
  const times = align8(counts + 4 * linkCount);
  const combinations = align8(times + widths.time * count);
  const registers = align8(combinations + widths.combination * count);
  return { links, counts, times, combinations, registers, bytes: registers + widths.register * count };
}

type UintArray = Uint8Array | Uint16Array | Uint32Array;
function uintView(buffer: ArrayBuffer, offset: number, width: number, length: number): UintArray {
  if (width === 1) return new Uint8Array(buffer, offset, length);
  if (width === 2) return new Uint16Array(buffer, offset, length);
  if (width === 4) return new Uint32Array(buffer, offset, length);
  throw new Error(`visit journal row: no column of ${width}-byte integers`);
}

/** The distinct strings of `fields` and each combination as six numbers (see JournalText). */
function fieldTable(fields: readonly VisitFields[]): { s: string[]; g: number[] } {
  const s: string[] = [];
  const codes = new Map<string, number>();
  const code = (value: string | null) => {
    if (value === null) return 0;
    let known = codes.get(value);
    if (known === undefined) codes.set(value, (known = s.push(value)));
    return known;
  };
  const g: number[] = [];
  for (const f of fields) {
    g.push(code(f.referrerHost), code(f.country), code(f.browser), code(f.os), code(f.device), f.bot ? 1 : 0);
  }
  return { s, g };
}

/** The largest of a column's first `count` values, which are unsigned integers (an index, a register). */
function maxOf(values: ArrayLike<number>, count: number): number {
  let max = 0;
  for (let v = 0; v < count; v++) {
    const value = values[v]!;
    if (!(value >= 0 && value < 2 ** 32 && Number.isInteger(value))) {
      throw new Error(`visit journal row: ${value} in a column of unsigned integers`);
    }
    if (value > max) max = value;
  }
  return max;
}

export function encodeJournal(visits: JournalVisits): Buffer {
  const { links, starts, times, combinations, registers } = visits;
  const count = starts[links.length] ?? 0;
  let earliest = count === 0 ? 0 : times[0]!;
  let latest = earliest;
  let whole = true;
  for (let v = 0; v < count; v++) {
    const time = times[v]!;
    if (time < earliest) earliest = time;
    if (time > latest) latest = time;
    if (!Number.isInteger(time)) whole = false;
  }
  const span = latest - earliest;
  const timeWidth = !whole || span >= 2 ** 32 ? 8 : span < 2 ** 16 ? 2 : 4;
  const combinationWidth = widthFor(maxOf(combinations, count));
  const registerWidth = widthFor(maxOf(registers, count));
  const header = Buffer.from(JSON.stringify(fieldTable(visits.fields)));
  const parts = layout(header.length, links.length, count, {
    time: timeWidth,
    combination: combinationWidth,
    register: registerWidth,
  });
  const bytes = Buffer.alloc(parts.bytes);
  const buffer = bytes.buffer as ArrayBuffer; // Buffer.alloc of this size: its own, from offset 0
  bytes.writeUInt8(BINARY_VERSION, 0);
  bytes.writeUInt8(timeWidth, 1);
  bytes.writeUInt8(combinationWidth, 2);
  bytes.writeUInt8(registerWidth, 3);
  bytes.writeUInt32LE(header.length, 4);
  bytes.writeUInt32LE(links.length, 8);
  bytes.writeUInt32LE(count, 12);
  bytes.writeDoubleLE(earliest, 16);
  header.copy(bytes, HEADER_BYTES);
  const linkColumn = new Float64Array(buffer, bytes.byteOffset + parts.links, links.length);
  const countColumn = new Uint32Array(buffer, bytes.byteOffset + parts.counts, links.length);
  for (let k = 0; k < links.length; k++) {
    linkColumn[k] = links[k]!;
    countColumn[k] = starts[k + 1]! - starts[k]!;
  }
  if (timeWidth === 8) copyColumn(new Float64Array(buffer, bytes.byteOffset + parts.times, count), times, count);
  else {
    const column = uintView(buffer, bytes.byteOffset + parts.times, timeWidth, count);
    for (let v = 0; v < count; v++) column[v] = times[v]! - earliest;
  }
  copyColumn(uintView(buffer, bytes.byteOffset + parts.combinations, combinationWidth, count), combinations, count);
  copyColumn(uintView(buffer, bytes.byteOffset + parts.registers, registerWidth, count), registers, count);
  return bytes;
}

function copyColumn(into: UintArray | Float64Array, from: ArrayLike<number>, count: number): void {
  for (let v = 0; v < count; v++) into[v] = from[v]!;
}

/** A journal row's visits: its bytes, or its text in the first format (JSON). */
export function decodeJournal(data: Uint8Array | string): JournalVisits {
  return typeof data === 'string' ? decodeJson(data) : decodeBinary(data);
}

function decodeBinary(data: Uint8Array): JournalVisits {
  // A column's view needs its offset aligned to its width: a copy of its own when it is not.
  const aligned = data.byteOffset % 8 === 0 ? data : data.slice();
  const bytes = Buffer.from(aligned.buffer, aligned.byteOffset, aligned.byteLength);
  if (bytes.length < HEADER_BYTES || bytes.readUInt8(0) !== BINARY_VERSION) {
    throw new Error(`visit journal row: not a version ${BINARY_VERSION} row (${bytes.length} bytes)`);
  }
  const buffer = bytes.buffer as ArrayBuffer;
  const at = (offset: number) => bytes.byteOffset + offset;
  const timeWidth = bytes.readUInt8(1);
  const combinationWidth = bytes.readUInt8(2);
  const registerWidth = bytes.readUInt8(3);
  const headerLength = bytes.readUInt32LE(4);
  const linkCount = bytes.readUInt32LE(8);
  const count = bytes.readUInt32LE(12);
  const earliest = bytes.readDoubleLE(16);
  const table = JSON.parse(bytes.toString('utf8', HEADER_BYTES, HEADER_BYTES + headerLength)) as {
    s: string[];
    g: number[];
  };
  const parts = layout(headerLength, linkCount, count, {
    time: timeWidth,
    combination: combinationWidth,
    register: registerWidth,
  });
  if (parts.bytes !== bytes.length) {
    throw new Error(`visit journal row: ${bytes.length} bytes where its header says ${parts.bytes}`);
  }
  const counts = new Uint32Array(buffer, at(parts.counts), linkCount);
  const starts = new Int32Array(linkCount + 1);
  for (let k = 0; k < linkCount; k++) starts[k + 1] = starts[k]! + counts[k]!;
  let times: Float64Array;
  if (timeWidth === 8) times = new Float64Array(buffer, at(parts.times), count);
  else {
    const offsets = uintView(buffer, at(parts.times), timeWidth, count);
    times = new Float64Array(count);
    for (let v = 0; v < count; v++) times[v] = earliest + offsets[v]!;
  }
  return {
    links: new Float64Array(buffer, at(parts.links), linkCount),
    starts,
    times,
    fields: fieldsOf(table),
    combinations: uintView(buffer, at(parts.combinations), combinationWidth, count),
    registers: uintView(buffer, at(parts.registers), registerWidth, count),
  };
}

const fieldsOf = ({ s, g }: { s: string[]; g: number[] }): VisitFields[] => {
  const fields: VisitFields[] = [];
  for (let at = 0; at < g.length; at += FIELDS) fields.push(combinationAt(g, at, s));
  return fields;
};

/** The first format's text (JournalText). */
function decodeJson(data: string): JournalVisits {
  const text = JSON.parse(data) as JournalText;
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
  return {
    links,
    starts,
    times,
    fields: fieldsOf(text),
    combinations: Int32Array.from(text.i),
    registers: Int32Array.from(text.r),
  };
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
