import { hourOf, type VisitDimension, type VisitRecord } from './visit.js';

/**
 * One mapping's statistics of one UTC day (issue 15), the one rollup row a day (`visit_days`):
 * visits and bots per hour, visits per dimension value, and a HyperLogLog sketch of the day's
 * salted visitor hashes. A batch of visits adds to it in memory and writes it back whole.
 */
export interface VisitDay {
  /** Visits per hour of the day (24). */
  readonly hours: number[];
  /** Bots per hour of the day (24). */
  readonly bots: number[];
  /** Per dimension, visits per value (`''`: unknown; OTHER_VALUE: the values past the cap). */
  readonly values: Record<VisitDimension, Record<string, number>>;
  /** HyperLogLog registers (SKETCH_REGISTERS bytes). */
  readonly sketch: Uint8Array;
}

/** Distinct values a dimension keeps per day; the visits of any further value go to OTHER_VALUE. */
export const VALUES_PER_DAY = 100;
/** The value the visits past the cap are counted under (no host, browser, OS or country is spelt so). */
export const OTHER_VALUE = '(other)';
/** 2^9 registers: a standard error of 1.04/√512 ≈ 4.6% (exact-ish below ~100 visitors, linear counting). */
const SKETCH_BITS = 9;
export const SKETCH_REGISTERS = 1 << SKETCH_BITS;
/** The bits of a visitor hash (48) left after the register index. */
const RANK_BITS = 48 - SKETCH_BITS;
const DIMENSIONS: readonly VisitDimension[] = ['referrer', 'country', 'browser', 'os', 'device'];

export function emptyVisitDay(): VisitDay {
  return {
    hours: new Array<number>(24).fill(0),
    bots: new Array<number>(24).fill(0),
    values: { referrer: {}, country: {}, browser: {}, os: {}, device: {} },
    sketch: new Uint8Array(SKETCH_REGISTERS),
  };
}

/** Adds `visits` to `value`, or to OTHER_VALUE once VALUES_PER_DAY other values are there. */
export function addValues(counts: Record<string, number>, value: string, visits: number): void {
  const known = counts[value];
  if (known !== undefined) counts[value] = known + visits;
  else if (Object.keys(counts).length < VALUES_PER_DAY + (OTHER_VALUE in counts ? 1 : 0)) counts[value] = visits;
  else counts[OTHER_VALUE] = (counts[OTHER_VALUE] ?? 0) + visits;
}

/** Adds one visit (its hour, bot flag and dimension values) to `day`. */
export function addVisit(day: VisitDay, v: VisitRecord): void {
  const hour = hourOf(v.visitedAt) % 24;
  day.hours[hour]!++;
  if (v.bot) day.bots[hour]!++;
  const { values } = day;
  addValues(values.referrer, v.referrerHost ?? '', 1);
  addValues(values.country, v.country ?? '', 1);
  addValues(values.browser, v.browser ?? '', 1);
  addValues(values.os, v.os ?? '', 1);
  addValues(values.device, v.device, 1);
}

/** The register a visitor (48 bits of the day's salted hash) raises. */
export const registerIndex = (hash: number) => hash % SKETCH_REGISTERS;

/** The rank a visitor raises its register to: the leading zeros of its other bits, plus one. */
export function registerRank(hash: number): number {
  const rest = Math.floor(hash / SKETCH_REGISTERS); // RANK_BITS bits
  const high = Math.floor(rest / 2 ** 32);
  const top = high > 0 ? 63 - Math.clz32(high) : rest > 0 ? 31 - Math.clz32(rest >>> 0) : -1;
  return RANK_BITS - top;
}

/** Adds a visitor (48 bits of the day's salted hash) to the sketch. */
export function addVisitor(day: VisitDay, hash: number): void {
  const index = registerIndex(hash);
  const rank = registerRank(hash);
  if (rank > day.sketch[index]!) day.sketch[index] = rank;
}

/** Adds `delta` into `into` (counts summed, the cap applied, sketches merged register-wise). */
export function mergeVisitDay(into: VisitDay, delta: VisitDay): VisitDay {
  for (let h = 0; h < 24; h++) {
    into.hours[h]! += delta.hours[h]!;
    into.bots[h]! += delta.bots[h]!;
  }
  for (const dimension of DIMENSIONS) {
    const counts = into.values[dimension];
    for (const [value, visits] of Object.entries(delta.values[dimension])) addValues(counts, value, visits);
  }
  for (let i = 0; i < SKETCH_REGISTERS; i++) if (delta.sketch[i]! > into.sketch[i]!) into.sketch[i] = delta.sketch[i]!;
  return into;
}

/** The distinct visitors the sketch estimates (HyperLogLog, linear counting while registers are empty). */
export function estimateVisitors(sketch: Uint8Array): number {
  let sum = 0;
  let zeros = 0;
  for (const register of sketch) {
    sum += 2 ** -register;
    if (register === 0) zeros++;
  }
  const m = SKETCH_REGISTERS;
  const raw = ((0.7213 / (1 + 1.079 / m)) * m * m) / sum;
  return Math.round(raw <= 2.5 * m && zeros > 0 ? m * Math.log(m / zeros) : raw);
}

/**
 * The sketch as stored: its non-zero registers as 16-bit `index << 6 | rank` (most days of most
 * links have few visitors), or all SKETCH_REGISTERS bytes once that is shorter.
 */
export function packSketch(sketch: Uint8Array): Buffer {
  const packed = Buffer.allocUnsafe(SKETCH_REGISTERS);
  let at = 0;
  for (let i = 0; i < SKETCH_REGISTERS; i++) {
    const rank = sketch[i]!;
    if (rank === 0) continue;
    if (at + 2 >= SKETCH_REGISTERS) return Buffer.from(sketch); // half or more set: dense is shorter
    packed.writeUInt16BE((i << 6) | rank, at);
    at += 2;
  }
  return packed.subarray(0, at);
}

/** As packSketch, from the non-zero registers alone (index → rank, in any order): no 512-register scan. */
export function packRegisters(registers: ReadonlyMap<number, number>): Buffer {
  if (registers.size * 2 >= SKETCH_REGISTERS) {
    // Half or more set: dense is shorter.
    const sketch = Buffer.alloc(SKETCH_REGISTERS);
    for (const [index, rank] of registers) sketch[index] = rank;
    return sketch;
  }
  const packed = Buffer.allocUnsafe(registers.size * 2);
  let at = 0;
  for (const index of [...registers.keys()].sort((a, b) => a - b)) {
    packed.writeUInt16BE((index << 6) | registers.get(index)!, at);
    at += 2;
  }
  return packed;
}

function unpackSketch(packed: Buffer): Uint8Array {
  const sketch = new Uint8Array(SKETCH_REGISTERS);
  mergePackedSketch(sketch, packed);
  return sketch;
}

/** Raises `sketch`'s registers to a stored sketch's (packSketch's form), register by register. */
export function mergePackedSketch(sketch: Uint8Array, packed: Buffer): void {
  if (packed.length === SKETCH_REGISTERS) {
    for (let i = 0; i < SKETCH_REGISTERS; i++) if (packed[i]! > sketch[i]!) sketch[i] = packed[i]!;
    return;
  }
  for (let at = 0; at < packed.length; at += 2) {
    const entry = packed.readUInt16BE(at);
    if ((entry & 63) > sketch[entry >> 6]!) sketch[entry >> 6] = entry & 63;
  }
}

/** The stored text: JSON (`h` hours, `b` bots, `v` values, `u` the packed sketch in base64). */
export function encodeVisitDay(day: VisitDay): string {
  return JSON.stringify({ h: day.hours, b: day.bots, v: day.values, u: packSketch(day.sketch).toString('base64') });
}

export function decodeVisitDay(text: string): VisitDay {
  const { h, b, v, u } = JSON.parse(text) as { h: number[]; b: number[]; v: VisitDay['values']; u: string };
  return { hours: h, bots: b, values: v, sketch: unpackSketch(Buffer.from(u, 'base64')) };
}
