/**
 * Deterministic test data, shared by the bench process (seeding, load generation) and the
 * baseline server (which builds the same mappings from a count), so both hold identical links.
 *
 * Seeded codes start with `0`, codes created during a run with `1`: the two never collide, and
 * neither can equal a route name (those start with a letter).
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

function mapping(prefix: string, index: number, path: string): Mapping {
  const code = prefix + base62(scramble(index), CODE_DIGITS);
  return { code, url: `https://example.com/${path}/${code}?ref=bench`, created_at: CREATED_AT, click_count: 0 };
}

/** The `index`-th stored mapping (0-based) of a seeded database. */
export function seedMapping(index: number): Mapping {
  return mapping('0', index, 'seeded');
}

let created = 0;

/** A mapping no target has seen before in this process: the body of one `POST /shorten`. */
export function freshMapping(): Mapping {
  return mapping('1', created++, 'created');
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
