import { describe, expect, it } from 'vitest';
import { intervalStart, spanRanges } from '../../src/domain/visit.js';

/** The blocks the daily rollups are read in: every day of a range once, no day outside it. */
describe('spanRanges', () => {
  const covered = (from: number, to: number) => {
    const days: number[] = [];
    for (const r of spanRanges(from, to)) {
      const size = 2 ** r.span;
      expect(r.from % size).toBe(0);
      expect(r.to % size).toBe(0);
      for (let start = r.from; start < r.to; start += size) for (let d = start; d < start + size; d++) days.push(d);
    }
    return days.sort((a, b) => a - b);
  };

  it('covers [from, to) exactly, for ranges of every length and alignment', () => {
    for (let from = 20_000; from < 20_070; from += 3) {
      for (const length of [0, 1, 7, 8, 9, 30, 63, 64, 65, 128, 200, 365, 400]) {
        expect(covered(from, from + length)).toEqual(Array.from({ length }, (_, i) => from + i));
      }
    }
  });

  it('reads a year as a few dozen blocks, not 365 days', () => {
    const ranges = spanRanges(20_001, 20_366);
    const blocks = ranges.reduce((n, r) => n + (r.to - r.from) / 2 ** r.span, 0);
    expect(blocks).toBeLessThanOrEqual(40);
  });
});

describe('intervalStart', () => {
  it('weeks start on Monday 00:00 UTC', () => {
    const wednesday = Date.parse('2026-11-25T15:00:00Z');
    expect(new Date(intervalStart(wednesday, 'week')).toISOString()).toBe('2026-11-23T00:00:00.000Z');
    expect(new Date(intervalStart(wednesday, 'day')).toISOString()).toBe('2026-11-25T00:00:00.000Z');
    expect(new Date(intervalStart(wednesday, 'hour')).toISOString()).toBe('2026-11-25T15:00:00.000Z');
  });
});
