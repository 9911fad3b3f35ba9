import { describe, expect, it } from 'vitest';
import { linkStatsCode, linkStatsPath } from '../src/lib/routes';
import {
  botShare,
  bucketLabel,
  customRange,
  defaultInterval,
  intervalsFor,
  MAX_POINTS,
  pointsOf,
  rangeFromQuery,
  rangeToQuery,
  topLabel,
  visitsFileName,
} from '../src/lib/stats';

const NOW = new Date('2026-11-25T12:34:56.000Z');
const DAY = 86_400_000;
const q = (text: string) => new URLSearchParams(text);

describe('the statistics range', () => {
  it('is the last 30 days per day when the address asks for nothing', () => {
    expect(rangeFromQuery(q(''), NOW)).toEqual({
      choice: '30d',
      from: new Date(NOW.getTime() - 30 * DAY),
      to: NOW,
      interval: 'day',
    });
  });

  it('a preset ends now and starts at its own interval: hours for 24 h, days for 7 to 90 days', () => {
    const of = (range: string) => rangeFromQuery(q(`range=${range}`), NOW);
    expect(of('24h')).toMatchObject({ from: new Date(NOW.getTime() - DAY), to: NOW, interval: 'hour' });
    expect(of('7d')).toMatchObject({ from: new Date(NOW.getTime() - 7 * DAY), interval: 'day' });
    expect(of('90d')).toMatchObject({ from: new Date(NOW.getTime() - 90 * DAY), interval: 'day' });
    expect(of('1y').choice).toBe('30d');
  });

  it('keeps an interval the address asks for when the range allows it, and refuses one that would give too many points', () => {
    expect(rangeFromQuery(q('range=7d&interval=hour'), NOW).interval).toBe('hour');
    expect(rangeFromQuery(q('range=90d&interval=week'), NOW).interval).toBe('week');
    // 90 days of hours is 2,160 points: more than a chart can show, so days.
    expect(rangeFromQuery(q('range=90d&interval=hour'), NOW).interval).toBe('day');
    expect(rangeFromQuery(q('range=7d&interval=minute'), NOW).interval).toBe('day');
  });

  it('a custom range runs from the first day’s start to the last day’s end, in UTC days', () => {
    const range = rangeFromQuery(q('from=2026-11-01&to=2026-11-07&interval=day'), NOW);
    expect(range).toEqual({
      choice: 'custom',
      from: new Date('2026-11-01T00:00:00.000Z'),
      to: new Date('2026-11-08T00:00:00.000Z'),
      interval: 'day',
    });
    expect(rangeFromQuery(q('from=2026-11-25&to=2026-11-25'), NOW)).toMatchObject({ interval: 'hour' });
  });

  it('says what is wrong with a custom range, and the address falls back to a preset', () => {
    expect(customRange('2026-11-07', '2026-11-01')).toEqual({ error: 'The To date is before the From date.' });
    expect(customRange('', '2026-11-01')).toEqual({ error: 'Enter both dates, From and To.' });
    expect(customRange('2026-02-30', '2026-03-01')).toEqual({ error: 'Enter both dates, From and To.' });
    expect(rangeFromQuery(q('from=2026-11-07&to=2026-11-01&range=7d'), NOW).choice).toBe('7d');
  });

  it('writes a range into the address and reads the same range back', () => {
    for (const text of [
      'range=24h&interval=hour',
      'range=90d&interval=week',
      'from=2026-01-01&to=2026-03-31&interval=week',
    ]) {
      const range = rangeFromQuery(q(text), NOW);
      expect(rangeToQuery(range)).toBe(text);
      expect(rangeFromQuery(q(rangeToQuery(range)), NOW)).toEqual(range);
    }
  });

  it('offers only the intervals that give at most MAX_POINTS points', () => {
    const from = new Date(NOW.getTime() - 90 * DAY);
    expect(pointsOf(from, NOW, 'hour')).toBe(2160);
    expect(intervalsFor(from, NOW)).toEqual(['day', 'week']);
    expect(intervalsFor(new Date(NOW.getTime() - DAY), NOW)).toEqual(['hour', 'day', 'week']);
    const years = new Date(NOW.getTime() - (MAX_POINTS + 1) * DAY);
    expect(intervalsFor(years, NOW)).toEqual(['week']);
    expect(defaultInterval(years, NOW)).toBe('week');
  });
});

describe('statistics in words', () => {
  it('labels hours in the reader’s time and days and weeks by their UTC date', () => {
    expect(bucketLabel('2026-11-24T15:00:00.000Z', 'hour', 'en-GB', 'Europe/Berlin')).toBe('24 Nov, 16:00');
    expect(bucketLabel('2026-11-24T00:00:00.000Z', 'day', 'en-GB')).toBe('24 Nov');
    expect(bucketLabel('2026-11-23T00:00:00.000Z', 'week', 'en-GB')).toBe('Week of 23 Nov');
  });

  it('gives the bot share with its counts, and says when there were no visits', () => {
    expect(botShare({ visits: 12, bots: 2 }, 'en-GB')).toEqual({ percent: '16.7%', counts: '2 of 12 visits' });
    expect(botShare({ visits: 1, bots: 0 }, 'en-GB')).toEqual({ percent: '0%', counts: '0 of 1 visit' });
    expect(botShare({ visits: 0, bots: 0 }, 'en-GB')).toEqual({ percent: '–', counts: 'No visits' });
  });

  it('names countries and device classes, and says what a missing value means', () => {
    expect(topLabel('countries', 'DE', 'en')).toBe('Germany (DE)');
    expect(topLabel('countries', 'XX', 'en')).toBe('XX');
    expect(topLabel('devices', 'mobile')).toBe('Mobile');
    expect(topLabel('referrers', null)).toBe('Direct or unknown');
    expect(topLabel('browsers', null)).toBe('Unknown');
    expect(topLabel('referrers', 'news.example.com')).toBe('news.example.com');
  });

  it('names the CSV of visits after the link and the days of the range', () => {
    const range = customRange('2026-11-01', '2026-11-07') as { from: Date; to: Date };
    expect(visitsFileName('abc1234', range)).toBe('abc1234-visits-2026-11-01-to-2026-11-07.csv');
  });
});

describe('the statistics page’s address', () => {
  it('carries the code, escaped, and gives it back', () => {
    expect(linkStatsPath('abc1234')).toBe('/app/links/abc1234/stats');
    expect(linkStatsCode('/app/links/abc1234/stats')).toBe('abc1234');
    expect(linkStatsCode('/app/links/abc1234/stats/')).toBe('abc1234');
    expect(linkStatsCode(linkStatsPath('a b/c'))).toBe('a b/c');
    expect(linkStatsCode('/app/links')).toBeNull();
    expect(linkStatsCode('/app/links/abc/stats/more')).toBeNull();
    expect(linkStatsCode('/app/links/%E0%A4%A/stats')).toBeNull();
  });
});
