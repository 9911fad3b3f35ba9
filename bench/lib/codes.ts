/**
 * Deterministic test data, shared by the bench process (seeding, load generation) and the
 * baseline server (which builds the same mappings from a count), so both hold identical links.
 *
 * Seeded codes start with `0`, codes created during a run with `1`: the two never collide, and
 * neither can equal a route name (those start with a letter). bench/wrk/uniform.lua computes the
 * seeded codes the same way, in Lua.
 */

export interface Mapping {
  readonly code: string;
  readonly url: string;
  readonly created_at: string;
  readonly click_count: number;
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** 62^6 > 2^32, so six base-62 digits hold any 32-bit number. */
const CODE_DIGITS = 6;
const CREATED_AT = '2024-01-01T00:00:00Z';

function base62(value: number, width: number): string {
  let text = '';
  for (let rest = value; rest > 0; rest = Math.floor(rest / 62)) text = BASE62[rest % 62] + text;
  return text.padStart(width, '0');
}

/** MurmurHash3's finaliser: a bijection on 32-bit integers, so distinct inputs give distinct codes. */
function scramble(value: number): number {
  let h = value >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** What every seeded and created mapping has; bench/wrk/shorten.lua sends the same. */
export const SEED_CREATED_AT = CREATED_AT;

/** The code of the seeded mapping whose scrambled index is `key` (see `seedKeysSorted`). */
export function seedCodeOfKey(key: number): string {
  return `0${base62(key, CODE_DIGITS)}`;
}

export function seedUrl(code: string): string {
  return `https://example.com/seeded/${code}?ref=bench`;
}

/** The `index`-th stored mapping (0-based) of a seeded database. */
export function seedMapping(index: number): Mapping {
  const code = seedCodeOfKey(scramble(index));
  return { code, url: seedUrl(code), created_at: CREATED_AT, click_count: 0 };
}

/**
 * The scrambled indexes of a table of `count` seeded mappings, ascending: their codes in this
 * order are ascending too (fixed width, base-62 digits in ASCII order), so a loader that inserts
 * in this order appends to the code index instead of writing all over it.
 */
export function seedKeysSorted(count: number): Uint32Array {
  const keys = new Uint32Array(count);
  for (let i = 0; i < count; i++) keys[i] = scramble(i);
  return keys.sort();
}

let created = Math.floor(Math.random() * 62 ** 4);

/**
 * A mapping no target has seen before in this process: the body of one probe `POST /shorten`.
 * Its code starts with "10", which no shorten run's tag does (those start with a letter).
 */
export function freshMapping(): Mapping {
  const code = `10${base62(created++ % 62 ** 5, 5)}`;
  return { code, url: `https://example.com/created/${code}?ref=bench`, created_at: CREATED_AT, click_count: 0 };
}

/**
 * A tag for one wrk run of bench/wrk/shorten.lua: the target's letter, then three random base-62
 * digits. Its codes are "1", the tag, the thread's digit and a counter, so they never collide
 * with seeded codes ("0..."), probe codes (7 characters) or another run's.
 */
export function shortenTag(targetLetter: string): string {
  return targetLetter + base62(Math.floor(Math.random() * 62 ** 3), 3);
}

/** The codes a target's shorten runs create start with this (see `shortenTag`). */
export function createdPrefix(targetLetter: string): string {
  return `1${targetLetter}`;
}

/** Mulberry32: a small seeded PRNG, so every run draws the same sample. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffled(values: number[], random: () => number): number[] {
  for (let i = values.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [values[i], values[j]] = [values[j]!, values[i]!];
  }
  return values;
}

function distinctDraws(count: number, below: number, random: () => number): number[] {
  const drawn = new Set<number>();
  while (drawn.size < count) drawn.add(Math.floor(random() * below));
  return [...drawn];
}

/**
 * The "popular links": `size` distinct stored mappings drawn uniformly from `mappings` rows with
 * a fixed seed (all of them, shuffled, when the table is not larger than `size`).
 */
export function popularMappings(mappings: number, size: number, seed: number): Mapping[] {
  const random = seededRandom(seed);
  const indexes =
    mappings <= size
      ? shuffled(
          Array.from({ length: mappings }, (_, i) => i),
          random,
        )
      : distinctDraws(size, mappings, random);
  return indexes.map(seedMapping);
}
