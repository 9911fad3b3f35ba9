/**
 * The capture's way to segments (src/support/visit-capture.ts, then the journal's text and its
 * merge, src/domain/visit-journal.ts) against the plain one: the same visits made into
 * VisitRecords one by one (classified, referrer cut, country checked, visitor hashed) and given to
 * `segmentsOf` must decode to the same visits, link by link, with the same visitor registers,
 * however the capture is sliced, grouped and split into flushes.
 */
import { describe, expect, it } from 'vitest';
import { countryCode, dayOf, referrerHost, type VisitRecord } from '../../src/domain/visit.js';
import { addSegment, decodeSegment, segmentsOf, type VisitSegmentRow } from '../../src/domain/visit-segment.js';
import { addVisit, addVisitor, emptyVisitDay } from '../../src/domain/visit-day.js';
import { decodeJournal, encodeJournal, JournalMerge, type MergeGroup } from '../../src/domain/visit-journal.js';
import { UserAgentClassifier } from '../../src/support/user-agents.js';
import { CaptureJournal, VisitCapture, visitorHash } from '../../src/support/visit-capture.js';
import { REFERRERS, USER_AGENTS } from '../helpers/visits.js';

interface Captured {
  readonly urlId: number;
  readonly time: number;
  readonly agent: string | undefined;
  readonly referer: string | undefined;
  readonly country: string | undefined;
  readonly address: string | undefined;
}

const COUNTRIES = ['DE', 'us', undefined, 'XX', 'not a country'];
const ADDRESSES = ['10.0.0.1', '10.0.0.2', '2001:db8::1', undefined];
const classifier = new UserAgentClassifier();

/**
 * `count` visits over `links` links, at times from `start` `step` ms apart, from clients whose
 * header values change at different paces: a link's next visit often shares some, not all.
 */
function visits(count: number, links: number, start: number, step: number): Captured[] {
  const at = <T>(values: readonly T[], n: number) => values[n % values.length];
  return Array.from({ length: count }, (_, n) => ({
    urlId: 1 + ((n * 7919) % links),
    time: start + n * step,
    agent: at(USER_AGENTS, Math.floor(n / 97)),
    referer: at(REFERRERS, Math.floor(n / 41)),
    country: at(COUNTRIES, n),
    address: at(ADDRESSES, Math.floor(n / 13)),
  }));
}

/** A merge's transactions, as the service makes them (smaller, to have several). */
const BATCH = { rows: 300, visits: 1_000 } as const;

const saltOf = (day: number) => `salt-${day}`;

/**
 * `captured` as a flush makes it into a journal row's bytes, `slice` visits prepared at a time
 * (into `capture`, empty, when given: one the visit buffer uses again).
 */
function journalText(captured: readonly Captured[], slice: number, capture = new VisitCapture()): Uint8Array {
  for (const v of captured) capture.add(v.urlId, v.time, v.agent, v.referer, v.country, v.address);
  const salts = new Map(capture.days().map((day) => [day, saltOf(day)]));
  const journal = new CaptureJournal(capture, salts, classifier);
  while (!journal.done) journal.take(slice);
  return encodeJournal(journal.visits());
}

/** The journal rows' segments, merged in groups of `limit` (each row merged through `mergedThrough`). */
function merged(texts: readonly Uint8Array[], limit = BATCH, mergedThrough = 0): MergeGroup[] {
  const merge = new JournalMerge(
    texts.map((text) => ({ visits: decodeJournal(text), mergedThrough })),
    limit,
  );
  const groups: MergeGroup[] = [];
  for (let group = merge.take(); group !== undefined; group = merge.take()) groups.push(group);
  return groups;
}

/** Every segment of `captured` by way of the capture, one flush, and the groups' sizes. */
function throughCapture(captured: readonly Captured[], limit = BATCH, slice = 700): MergeGroup[] {
  return merged([journalText(captured, slice)], limit);
}

/** The same visits as records, one by one, and their visitors' hashes. */
function records(captured: readonly Captured[]): { visits: VisitRecord[]; visitors: number[] } {
  const visits = captured.map((v): VisitRecord => {
    const { browser, os, device, bot } = classifier.classify(v.agent);
    return {
      urlId: v.urlId,
      visitedAt: v.time,
      referrerHost: referrerHost(v.referer),
      browser,
      os,
      device,
      bot,
      country: countryCode(v.country),
    };
  });
  const visitors = captured.map((v) => visitorHash(saltOf(dayOf(v.time)), v.address, v.agent));
  return { visits, visitors };
}

type Day = ReturnType<typeof emptyVisitDay>;

/** Per link and day, the day row its visits make one by one (visit-day's own way, not a segment's). */
function daysOf(visits: readonly VisitRecord[], visitors: readonly number[]) {
  const links = new Map<number, Map<number, Day>>();
  visits.forEach((v, n) => {
    const days = links.get(v.urlId) ?? new Map<number, Day>();
    links.set(v.urlId, days);
    const day = days.get(dayOf(v.visitedAt)) ?? emptyVisitDay();
    days.set(dayOf(v.visitedAt), day);
    addVisit(day, v);
    addVisitor(day, visitors[n]!);
  });
  return links;
}

/** Per link, its visits decoded in order, and the day rows its segments add up to. */
function byLink(rows: readonly VisitSegmentRow[]) {
  const links = new Map<number, { visits: VisitRecord[]; days: Map<number, Day> }>();
  for (const row of rows) {
    const link = links.get(row.url_id) ?? { visits: [] as VisitRecord[], days: new Map<number, Day>() };
    links.set(row.url_id, link);
    link.visits.push(...decodeSegment(row.url_id, row.first_ms, row.data));
    const day = link.days.get(row.day) ?? emptyVisitDay();
    link.days.set(row.day, day);
    addSegment(day, row.first_ms, row.data);
  }
  return links;
}

describe('a capture made into segments by way of the journal', () => {
  it('holds every visit once, with the fields and visitors the plain way gives, in groups of about a batch', () => {
    const start = Date.UTC(2026, 10, 27, 23, 59, 30); // across midnight
    const captured = visits(5_000, 37, start, 13);
    const groups = throughCapture(captured);
    const rows = groups.flatMap((g) => g.rows);
    const { visits: plain, visitors } = records(captured);
    expect(byLink(rows)).toEqual(byLink(segmentsOf(plain, visitors)));
    expect(new Map([...byLink(rows)].map(([urlId, link]) => [urlId, link.days]))).toEqual(daysOf(plain, visitors));
    expect(groups.reduce((sum, g) => sum + g.visits, 0)).toBe(captured.length);
    groups.forEach((group, n) => {
      expect(group.visits).toBe(group.rows.reduce((sum, r) => sum + r.visits, 0));
      // A group ends at its last link's last segment, once it has reached a limit (the last group: once all are in).
      const last = group.rows.filter((r) => r.url_id === group.through);
      expect(group.rows.at(-1)!.url_id).toBe(group.through);
      const before = group.rows.length - last.length;
      const visitsBefore = group.visits - last.reduce((sum, r) => sum + r.visits, 0);
      expect(before < 300 && visitsBefore < 1_000).toBe(true);
      if (n < groups.length - 1) expect(group.rows.length >= 300 || group.visits >= 1_000).toBe(true);
    });
    // By link, then time, over all the groups.
    const order = rows.map((r) => [r.url_id, r.first_ms]);
    expect(order).toEqual([...order].sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!));
    expect(new Set(rows.map((r) => r.day)).size).toBe(2);
  });

  it('gives the same journal row however finely it is sliced', () => {
    const captured = visits(3_000, 50, Date.UTC(2026, 10, 27, 12), 7);
    const whole = journalText(captured, 1_000_000);
    expect(journalText(captured, 1)).toEqual(whole);
    expect(journalText(captured, 333)).toEqual(whole);
  });

  it('a capture emptied and used again gives each flush the row a new one gives, and keeps no string from before', () => {
    const start = Date.UTC(2026, 10, 27, 12);
    // It grows (9,000 visits), is given back half its room (300, under a quarter), grows again.
    const flushes = [visits(9_000, 700, start, 5), visits(300, 50, start + 60_000, 100), visits(5_000, 300, start, 20)];
    const reused = new VisitCapture();
    for (const flush of flushes) {
      expect(journalText(flush, 700, reused)).toEqual(journalText(flush, 700));
      reused.clear();
      expect(reused.length).toBe(0);
      expect(reused.values).toEqual([]);
      expect(reused.days()).toEqual([]);
    }
  });

  it('merges the journal rows of several flushes into one segment a link, as one capture of them all', () => {
    const start = Date.UTC(2026, 10, 27, 12);
    const captured = visits(6_000, 200, start, 1);
    const flushes = [captured.slice(0, 1_000), captured.slice(1_000, 3_500), captured.slice(3_500)];
    const rows = merged(flushes.map((flush) => journalText(flush, 500))).flatMap((g) => g.rows);
    const { visits: plain, visitors } = records(captured);
    expect(rows).toEqual(segmentsOf(plain, visitors));
    // 30 visits a link, 6 s: one segment each, not one a flush.
    expect(rows).toHaveLength(200);
  });

  it('merges two instances’ rows of the same seconds into one segment a link, in time order', () => {
    const captured = visits(4_000, 100, Date.UTC(2026, 10, 27, 12), 1);
    // Two instances answering the same links at the same time: each one's flushes interleave.
    const instances = [captured.filter((_, n) => n % 2 === 0), captured.filter((_, n) => n % 2 === 1)];
    const texts = [
      instances[0]!.slice(0, 1_000),
      instances[1]!.slice(0, 1_000),
      instances[0]!.slice(1_000),
      instances[1]!.slice(1_000),
    ].map((flush) => journalText(flush, 500));
    const rows = merged(texts).flatMap((g) => g.rows);
    const { visits: plain, visitors } = records(captured);
    expect(rows).toEqual(segmentsOf(plain, visitors));
    expect(rows).toHaveLength(100);
  });

  it('leaves out the links a row is merged through already', () => {
    const captured = visits(2_000, 100, Date.UTC(2026, 10, 27, 12), 3);
    const texts = [journalText(captured.slice(0, 900), 300), journalText(captured.slice(900), 300)];
    const rest = merged(texts, BATCH, 40).flatMap((g) => g.rows);
    const { visits: plain, visitors } = records(captured);
    expect(rest).toEqual(segmentsOf(plain, visitors).filter((r) => r.url_id > 40));
    expect(merged(texts, BATCH, 100)).toEqual([]);
  });

  it('closes a group at its rows when the links are clicked once each', () => {
    const captured = visits(1_000, 1_000, Date.UTC(2026, 10, 27, 12), 1);
    const groups = throughCapture(captured, BATCH, 4_000);
    expect(groups.map((g) => [g.rows.length, g.visits])).toEqual([
      [300, 300],
      [300, 300],
      [300, 300],
      [100, 100],
    ]);
  });

  it('puts a link’s visits in time order when the clock went back while capturing', () => {
    const start = Date.UTC(2026, 10, 27, 12);
    const captured = visits(400, 3, start, 10).map((v, n) => (n >= 200 ? { ...v, time: v.time - 1_500 } : v));
    const rows = throughCapture(captured, BATCH, 100).flatMap((g) => g.rows);
    const { visits: plain, visitors } = records(captured);
    expect(byLink(rows)).toEqual(byLink(segmentsOf(plain, visitors)));
    for (const [, link] of byLink(rows)) {
      const times = link.visits.map((v) => v.visitedAt);
      expect(times).toEqual([...times].sort((a, b) => a - b));
    }
    // One segment a link: nothing was cut at the step back.
    expect(rows).toHaveLength(3);
  });

  it('splits a busy link’s visits at SEGMENT_VISITS, all in the group of their link', () => {
    const captured = visits(2_500, 1, Date.UTC(2026, 10, 27, 12), 1);
    const groups = throughCapture(captured, BATCH, 4_000);
    expect(groups.map((g) => g.rows.map((r) => r.visits))).toEqual([[1024, 1024, 452]]);
  });

  it('keeps no address or User-Agent in the journal row or the segments', () => {
    const captured = visits(500, 5, Date.UTC(2026, 10, 27, 12), 100);
    const text = journalText(captured, 100);
    const rows = merged([text]).flatMap((g) => g.rows);
    for (const secret of [...ADDRESSES, ...USER_AGENTS]) {
      if (secret) expect(text + JSON.stringify(rows)).not.toContain(secret);
    }
    expect(rows.length).toBeGreaterThan(0);
  });
});
