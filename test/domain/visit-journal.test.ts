/**
 * A journal row's bytes (src/domain/visit-journal.ts): the binary format round-trips every column
 * exactly, whatever widths its values need, rows of the first format (JSON) still decode, and
 * what is not a row is refused with a reason instead of decoding to wrong visits.
 */
import { describe, expect, it } from 'vitest';
import { decodeJournal, encodeJournal, type JournalVisits, registerCode } from '../../src/domain/visit-journal.js';
import type { VisitFields } from '../../src/domain/visit-segment.js';
import { firstFormatJournal } from '../helpers/visits.js';

const FIELDS: VisitFields[] = [
  { referrerHost: null, country: null, browser: null, os: null, device: 'other', bot: false },
  { referrerHost: 'news.example.com', country: 'DE', browser: 'Chrome', os: 'Windows', device: 'desktop', bot: false },
  { referrerHost: null, country: 'US', browser: null, os: null, device: 'bot', bot: true },
];

const T0 = Date.UTC(2026, 10, 29, 12);

/** `perLink` visits on each of `links`, the n-th of them all at `time(n)`, its combination and register from n. */
function journal(
  links: readonly number[],
  perLink: number,
  time: (n: number) => number,
  combination: (n: number) => number = (n) => n % FIELDS.length,
  register: (n: number) => number = (n) => registerCode(n % 512, 1 + (n % 40)),
  fields: readonly VisitFields[] = FIELDS,
): JournalVisits {
  const count = links.length * perLink;
  const starts = Int32Array.from({ length: links.length + 1 }, (_, k) => k * perLink);
  return {
    links: Float64Array.from(links),
    starts,
    times: Float64Array.from({ length: count }, (_, n) => time(n)),
    fields,
    combinations: Int32Array.from({ length: count }, (_, n) => combination(n)),
    registers: Int32Array.from({ length: count }, (_, n) => register(n)),
  };
}

/** A decoded row as plain arrays, to compare with what was encoded. */
const plain = (visits: JournalVisits) => ({
  links: Array.from(visits.links),
  starts: Array.from(visits.starts),
  times: Array.from(visits.times),
  fields: visits.fields,
  combinations: Array.from(visits.combinations),
  registers: Array.from(visits.registers),
});

/** The byte widths the row's header gives its times, combinations and registers. */
const widths = (bytes: Uint8Array) => [bytes[1]!, bytes[2]!, bytes[3]!];

describe('a visit journal row', () => {
  it('decodes to exactly the visits it was encoded from, in as few bytes as their values need', () => {
    const visits = journal([3, 17, 4_000_000_000, 2 ** 40], 250, (n) => T0 + ((n * 37) % 500));
    const bytes = encodeJournal(visits);
    expect(plain(decodeJournal(bytes))).toEqual(plain(visits));
    // Half a second of times in 2 bytes, 3 combinations in 1, registers under 32,768 in 2.
    expect(widths(bytes)).toEqual([2, 1, 2]);
    expect(bytes.length).toBeLessThan(1_000 * 6);
    // As PostgreSQL's adapter stores and reads it, and at an offset no column is aligned to.
    const copied = Buffer.from(bytes.toString('base64'), 'base64');
    expect(plain(decodeJournal(copied))).toEqual(plain(visits));
    const shifted = new Uint8Array(bytes.length + 3).subarray(3);
    shifted.set(bytes);
    expect(plain(decodeJournal(shifted))).toEqual(plain(visits));
  });

  it('widens a column whose values need it, and keeps times that are no whole milliseconds as they are', () => {
    const cases: { name: string; visits: JournalVisits; widths: number[] }[] = [
      { name: 'over a minute', visits: journal([1, 2], 40, (n) => T0 + n * 2_000), widths: [4, 1, 2] },
      { name: 'over 49 days', visits: journal([1], 3, (n) => T0 + n * 2 ** 31), widths: [8, 1, 1] },
      { name: 'fractions', visits: journal([1], 3, (n) => T0 + n + 0.25), widths: [8, 1, 1] },
      {
        name: 'many combinations and large registers',
        visits: journal(
          [5],
          300,
          (n) => T0 + n,
          (n) => n,
          (n) => 70_000 + n,
          Array.from({ length: 300 }, (_, n) => ({ ...FIELDS[1]!, referrerHost: `host${n}.example` })),
        ),
        widths: [2, 2, 4],
      },
    ];
    for (const { name, visits, widths: expected } of cases) {
      const bytes = encodeJournal(visits);
      expect(widths(bytes), name).toEqual(expected);
      expect(plain(decodeJournal(bytes)), name).toEqual(plain(visits));
    }
  });

  it('holds no visits at all', () => {
    const empty = journal([], 0, () => T0);
    expect(plain(decodeJournal(encodeJournal(empty)))).toEqual(plain(empty));
  });

  it('reads a row of the first format, JSON text, as it reads the same visits written now', () => {
    const visits = journal([2, 9], 3, (n) => T0 + [5, 0, 7, 1, 1, 3][n]!);
    // Written by the version before the binary format: strings once, combinations as six numbers,
    // links and times as differences.
    const json = JSON.stringify({
      s: ['desktop', 'news.example.com', 'DE', 'Chrome', 'Windows', 'US', 'bot', 'other'],
      g: [0, 0, 0, 0, 8, 0, 2, 3, 4, 5, 1, 0, 0, 6, 0, 0, 7, 1],
      l: [2, 7],
      n: [3, 3],
      f: T0 + 5,
      t: [0, -5, 7, -6, 0, 2],
      i: [0, 1, 2, 0, 1, 2],
      r: Array.from(visits.registers),
    });
    expect(plain(decodeJournal(json))).toEqual(plain(visits));
    // And the helper other tests write such rows with.
    const many = journal([1, 4, 9], 50, (n) => T0 + ((n * 7) % 300));
    expect(plain(decodeJournal(firstFormatJournal(many)))).toEqual(plain(many));
  });

  it('refuses what is not a row of its format, and values a column cannot hold', () => {
    const bytes = encodeJournal(journal([1, 2], 10, (n) => T0 + n));
    expect(() => decodeJournal(bytes.subarray(0, -6))).toThrow(/bytes where its header says/);
    const other = Buffer.from(bytes);
    other[0] = 3;
    expect(() => decodeJournal(other)).toThrow(/not a version 2 row/);
    expect(() => decodeJournal(new Uint8Array(3))).toThrow(/not a version 2 row/);
    expect(() =>
      encodeJournal(
        journal(
          [1],
          2,
          (n) => T0 + n,
          () => -1,
        ),
      ),
    ).toThrow(/-1 in a column of unsigned integers/);
  });
});
