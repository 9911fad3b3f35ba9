import { describe, expect, it } from 'vitest';
import { DAY_MS, type VisitRecord } from '../../src/domain/visit.js';
import { addVisit, addVisitor, emptyVisitDay } from '../../src/domain/visit-day.js';
import {
  addSegment,
  decodeSegment,
  SEGMENT_SPAN_MS,
  SEGMENT_VISITS,
  segmentsOf,
} from '../../src/domain/visit-segment.js';

const visit = (urlId: number, visitedAt: number, n = 0): VisitRecord => ({
  urlId,
  visitedAt,
  referrerHost: n % 3 === 0 ? null : `r${n % 5}.example`,
  browser: n % 2 === 0 ? 'Chrome' : 'Firefox',
  os: n % 4 === 0 ? null : 'Linux',
  device: n % 7 === 0 ? 'bot' : 'desktop',
  bot: n % 7 === 0,
  country: n % 2 === 0 ? 'DE' : null,
});

describe('visit segments', () => {
  it('hold every visit of a batch once, by link and time, with every field as given', () => {
    const start = Date.UTC(2026, 10, 26, 12);
    const visits = Array.from({ length: 500 }, (_, n) => visit(1 + (n % 3), start + ((n * 7919) % 2000), n));
    const segments = segmentsOf(visits);
    expect(segments.map((s) => s.url_id)).toEqual([1, 2, 3]);
    const decoded = segments.flatMap((s) => decodeSegment(s.url_id, s.first_ms, s.data));
    const byLinkAndTime = (a: VisitRecord, b: VisitRecord) => a.urlId - b.urlId || a.visitedAt - b.visitedAt;
    expect(decoded).toEqual([...visits].sort(byLinkAndTime));
    for (const s of segments) {
      const own = decodeSegment(s.url_id, s.first_ms, s.data);
      expect([s.visits, s.first_ms, s.last_ms]).toEqual([own.length, own[0]!.visitedAt, own.at(-1)!.visitedAt]);
    }
  });

  it('split at a UTC day, at SEGMENT_SPAN_MS and at SEGMENT_VISITS visits', () => {
    const midnight = 20_000 * DAY_MS;
    const acrossDay = segmentsOf([visit(1, midnight - 1), visit(1, midnight)]);
    expect(acrossDay.map((s) => [s.day, s.visits])).toEqual([
      [19_999, 1],
      [20_000, 1],
    ]);
    const acrossSpan = segmentsOf([
      visit(1, midnight),
      visit(1, midnight + SEGMENT_SPAN_MS),
      visit(1, midnight + SEGMENT_SPAN_MS + 1),
    ]);
    expect(acrossSpan.map((s) => s.visits)).toEqual([2, 1]);
    const many = segmentsOf(Array.from({ length: SEGMENT_VISITS * 2 + 1 }, (_, n) => visit(1, midnight + 1000, n)));
    expect(many.map((s) => s.visits)).toEqual([SEGMENT_VISITS, SEGMENT_VISITS, 1]);
  });

  it('add to a day row what adding their visits one by one adds, and their visitors to the sketch', () => {
    const start = Date.UTC(2026, 10, 26, 0, 30);
    const visits = Array.from({ length: 300 }, (_, n) => visit(4, start + n * 40_000, n));
    const hashes = visits.map((_, n) => (n * 2_654_435_761) % 2 ** 48);
    const one = emptyVisitDay();
    for (const v of visits) addVisit(one, v);
    const segments = segmentsOf(visits, hashes);
    expect(segments.length).toBeGreaterThan(1);
    const folded = emptyVisitDay();
    for (const s of segments) addSegment(folded, s.first_ms, s.data);
    expect({ ...folded, sketch: undefined }).toEqual({ ...one, sketch: undefined });
    const expected = emptyVisitDay();
    for (const hash of hashes) addVisitor(expected, hash);
    expect(folded.sketch).toEqual(expected.sketch);
  });

  it('keep each distinct combination of fields once, and read segments written before that (six numbers a visit) the same', () => {
    const start = Date.UTC(2026, 10, 26, 9);
    const visits = Array.from({ length: 200 }, (_, n) => visit(5, start + n * 100, n % 4 === 3 ? n : 0));
    const [segment] = segmentsOf(
      visits,
      visits.map((_, n) => n * 7_919),
    );
    const text = JSON.parse(segment!.data) as { g: number[]; i: number[]; f?: number[] };
    const distinct = new Set(visits.map((v) => JSON.stringify({ ...v, visitedAt: 0 }))).size;
    expect(text.g).toHaveLength(6 * distinct);
    expect(text.i).toHaveLength(200);
    expect(text.f).toBeUndefined();
    // The same visits as the older form held them: each visit's six numbers in `f`.
    const { g, i, ...rest } = text;
    const older = JSON.stringify({ ...rest, f: i.flatMap((c) => g.slice(c * 6, c * 6 + 6)) });
    expect(decodeSegment(5, segment!.first_ms, older)).toEqual(decodeSegment(5, segment!.first_ms, segment!.data));
    expect(decodeSegment(5, segment!.first_ms, segment!.data)).toEqual(visits);
    const [fromOlder, fromNewer] = [emptyVisitDay(), emptyVisitDay()];
    addSegment(fromOlder, segment!.first_ms, older);
    addSegment(fromNewer, segment!.first_ms, segment!.data);
    expect(fromNewer).toEqual(fromOlder);
    const one = emptyVisitDay();
    for (const v of visits) addVisit(one, v);
    expect({ ...fromNewer, sketch: undefined }).toEqual({ ...one, sketch: undefined });
  });
});
