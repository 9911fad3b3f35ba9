import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { intervalStart, type VisitRecord } from '../../src/domain/visit.js';
import {
  addVisit,
  addVisitor,
  decodeVisitDay,
  emptyVisitDay,
  encodeVisitDay,
  estimateVisitors,
  mergeVisitDay,
  OTHER_VALUE,
  VALUES_PER_DAY,
} from '../../src/domain/visit-day.js';

const hash = (n: number) => createHash('sha256').update(`visitor ${n}`).digest().readUIntBE(0, 6);
const visit = (referrerHost: string | null, hour = 0): VisitRecord => ({
  urlId: 1,
  visitedAt: Date.parse('2026-11-25T00:00:00Z') + hour * 3_600_000,
  referrerHost,
  browser: 'Chrome',
  os: null,
  device: 'desktop',
  bot: false,
  country: null,
});

/** The one rollup row per mapping and day: counts, the value cap and the visitor sketch. */
describe('visit day rows', () => {
  it('count hours and values, and survive their stored text', () => {
    const day = emptyVisitDay();
    addVisit(day, visit('a.example', 3));
    addVisit(day, { ...visit(null, 23), bot: true, device: 'bot' });
    const read = decodeVisitDay(encodeVisitDay(day));
    expect(read.hours[3]).toBe(1);
    expect(read.bots[23]).toBe(1);
    expect(read.values.referrer).toEqual({ 'a.example': 1, '': 1 });
    expect(read.values.device).toEqual({ desktop: 1, bot: 1 });
  });

  it(`keep ${VALUES_PER_DAY} values per dimension and count the rest as ${OTHER_VALUE}, merged or added`, () => {
    const one = emptyVisitDay();
    const two = emptyVisitDay();
    for (let i = 0; i < 150; i++) addVisit(i < 80 ? one : two, visit(`host${i}.example`));
    addVisit(two, visit('host0.example'));
    const merged = mergeVisitDay(one, two);
    const counts = merged.values.referrer;
    expect(Object.keys(counts)).toHaveLength(VALUES_PER_DAY + 1);
    expect(counts['host0.example']).toBe(2);
    expect(counts[OTHER_VALUE]).toBe(50);
    expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(151);
  });

  it('estimate distinct visitors within the sketch error, merged sketches as the union', () => {
    for (const n of [1, 10, 100, 250, 300, 1_000, 10_000, 100_000]) {
      const day = emptyVisitDay();
      const half = emptyVisitDay();
      for (let i = 0; i < n; i++) {
        addVisitor(day, hash(i));
        addVisitor(day, hash(i)); // a second sighting adds nothing
        if (i < n / 2) addVisitor(half, hash(i));
      }
      const estimate = estimateVisitors(day.sketch);
      expect(Math.abs(estimate - n)).toBeLessThanOrEqual(Math.max(1, n * 0.14)); // 3 standard errors
      expect(estimateVisitors(mergeVisitDay(half, day).sketch)).toBe(estimate);
      expect(decodeVisitDay(encodeVisitDay(day)).sketch).toEqual(day.sketch); // sparse or dense, as stored
    }
    expect(estimateVisitors(emptyVisitDay().sketch)).toBe(0);
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
