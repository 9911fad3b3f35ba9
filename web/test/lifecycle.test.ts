import { describe, expect, it } from 'vitest';
import { fileNameFrom } from '../src/lib/download';
import {
  fromLocalInput,
  lifecycleChanges,
  lifecycleForCreate,
  linkState,
  linkStateText,
  parseMaxVisits,
  toLocalInput,
} from '../src/lib/lifecycle';
import {
  exportFileName,
  type ImportReport,
  importDetailText,
  importStatusLabel,
  importSummary,
  importTypeOf,
  rowsToShow,
} from '../src/lib/link-import';

const NOW = new Date('2026-11-25T12:00:00.000Z');

describe('a link’s lifecycle', () => {
  it('is active without limits, with what is left of them', () => {
    expect(linkState({ click_count: 3 }, NOW)).toEqual({ kind: 'active', expiresAt: null, visitsLeft: null });
    expect(linkState({ click_count: 3, max_visits: 10, expires_at: '2026-12-01T00:00:00Z' }, NOW)).toEqual({
      kind: 'active',
      expiresAt: new Date('2026-12-01T00:00:00Z'),
      visitsLeft: 7,
    });
  });

  it('has expired from its expiry time on, and reached its limit at max_visits clicks', () => {
    expect(linkState({ click_count: 0, expires_at: NOW.toISOString() }, NOW)).toEqual({ kind: 'expired', at: NOW });
    expect(linkState({ click_count: 10, max_visits: 10 }, NOW)).toEqual({ kind: 'limit-reached', maxVisits: 10 });
    expect(linkState({ click_count: 9, max_visits: 10 }, NOW).kind).toBe('active');
  });

  it('says so on the card', () => {
    const at = (iso: string) => linkStateText(linkState({ click_count: 1, expires_at: iso }, NOW), 'en-GB', 'UTC');
    expect(at('2026-11-20T08:30:00Z')).toEqual({ badge: 'Expired', note: 'Expired 20 Nov 2026, 08:30' });
    expect(at('2026-12-20T08:30:00Z')).toEqual({ note: 'Expires 20 Dec 2026, 08:30' });
    expect(linkStateText(linkState({ click_count: 1, max_visits: 1 }, NOW))).toEqual({
      badge: 'Limit reached',
      note: 'Reached its limit of 1 visit',
    });
    expect(linkStateText(linkState({ click_count: 1, max_visits: 2 }, NOW))).toEqual({ note: '1 visit left' });
    expect(linkStateText(linkState({ click_count: 1 }, NOW))).toEqual({ note: '' });
  });
});

describe('the lifecycle fields of the forms', () => {
  it('turn a local date and time into the API’s time and back', () => {
    const iso = fromLocalInput('2026-12-01T09:15');
    expect(iso).toBe(new Date(2026, 11, 1, 9, 15).toISOString());
    expect(toLocalInput(iso)).toBe('2026-12-01T09:15');
    expect(fromLocalInput('')).toBeNull();
    expect(toLocalInput(null)).toBe('');
    expect(() => fromLocalInput('soon')).toThrow('Enter the expiry as a date and a time.');
  });

  it('take max visits as a whole number of at least 1, or none', () => {
    expect(parseMaxVisits(null)).toBeNull();
    expect(parseMaxVisits('')).toBeNull();
    expect(parseMaxVisits(5)).toBe(5);
    expect(parseMaxVisits('12')).toBe(12);
    for (const bad of [0, -1, 1.5, 'many']) {
      expect(() => parseMaxVisits(bad)).toThrow('Max visits must be a whole number of at least 1.');
    }
  });

  it('send on create only what was filled in', () => {
    expect(lifecycleForCreate('', null)).toEqual({});
    expect(lifecycleForCreate('2026-12-01T09:15', 3)).toEqual({
      expires_at: new Date(2026, 11, 1, 9, 15).toISOString(),
      max_visits: 3,
    });
  });

  it('send on edit only what changed, null for a field emptied (which clears it)', () => {
    const from = { expires_at: new Date(2026, 11, 1, 9, 15).toISOString(), max_visits: 10 };
    expect(lifecycleChanges(from, '2026-12-01T09:15', 10)).toEqual({});
    expect(lifecycleChanges(from, '', null)).toEqual({ expires_at: null, max_visits: null });
    expect(lifecycleChanges({}, '', 4)).toEqual({ max_visits: 4 });
    expect(lifecycleChanges({ expires_at: null, max_visits: null }, '2026-12-02T00:00', null)).toEqual({
      expires_at: new Date(2026, 11, 2).toISOString(),
    });
  });
});

describe('import and export', () => {
  const report: ImportReport = {
    dry_run: false,
    totals: { rows: 3, created: 1, taken: 1, refused: 1 },
    rows: [
      { row: 1, code: 'abc1234', status: 'created' },
      { row: 2, code: 'taken12', status: 'taken', detail: 'Code already exists' },
      { row: 3, code: 'bad code', status: 'refused', detail: 'The code may hold only letters and digits.' },
    ],
  };

  it('sends a picked file as CSV or JSON by its name or type, and refuses anything else', () => {
    expect(importTypeOf({ name: 'links.CSV', type: '' })).toBe('text/csv');
    expect(importTypeOf({ name: 'export', type: 'text/csv' })).toBe('text/csv');
    expect(importTypeOf({ name: 'links.json', type: '' })).toBe('application/json');
    expect(importTypeOf({ name: 'links.xlsx', type: 'application/vnd.ms-excel' })).toBeNull();
  });

  it('sums the report up in a sentence, a dry run saying nothing was imported', () => {
    expect(importSummary(report)).toBe('Imported 3 rows: 1 created, 1 already taken, 1 refused.');
    expect(importSummary({ ...report, dry_run: true })).toBe(
      'Checked 3 rows, nothing imported: 1 would be created, 1 already taken, 1 refused.',
    );
    expect(importSummary({ dry_run: true, totals: { rows: 1, created: 1, taken: 0, refused: 0 }, rows: [] })).toBe(
      'Checked 1 row, nothing imported: 1 would be created, 0 already taken, 0 refused.',
    );
  });

  it('names each row’s result, and can list the problems alone', () => {
    expect(importStatusLabel('created', true)).toBe('Would be created');
    expect(importStatusLabel('created', false)).toBe('Created');
    expect(importStatusLabel('taken', false)).toBe('Already taken');
    expect(importStatusLabel('refused', true)).toBe('Refused');
    expect(rowsToShow(report, true).map((r) => r.row)).toEqual([2, 3]);
    expect(rowsToShow(report, false)).toHaveLength(3);
  });

  it('makes a sentence of a row’s reason', () => {
    expect(importDetailText("'url' must not contain whitespace or control characters")).toBe(
      'The URL must not contain whitespace or control characters.',
    );
    expect(importDetailText("'code' must be 6 to 10 letters and digits")).toBe(
      'The code must be 6 to 10 letters and digits.',
    );
    expect(importDetailText('the code is taken')).toBe('The code is taken.');
    expect(importDetailText('Code already exists.')).toBe('Code already exists.');
    expect(importDetailText(undefined)).toBe('');
  });

  it('saves a download under the server’s name for it, else a name of its own', () => {
    expect(fileNameFrom('attachment; filename="links.csv"', 'x')).toBe('links.csv');
    expect(fileNameFrom("attachment; filename*=UTF-8''l%C3%AFnks.json", 'x')).toBe('lïnks.json');
    expect(fileNameFrom('attachment; filename="../../etc/passwd"', 'fallback.csv')).toBe('fallback.csv');
    expect(fileNameFrom(null, 'fallback.csv')).toBe('fallback.csv');
    expect(exportFileName('json', NOW)).toBe('links-2026-11-25.json');
  });
});
