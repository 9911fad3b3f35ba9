/**
 * Import and export on the links page: which media type a picked file is sent as, and the server's
 * per-row report (`POST /api/v1/links/import`) in words.
 */

import type { operations } from './api-types';

/** The answer of `POST /api/v1/links/import`; `detail` only when the server stopped part-way. */
export type ImportReport = operations['import_links']['responses'][200]['content']['application/json'];
export type ImportRow = ImportReport['rows'][number];
export type ImportStatus = ImportRow['status'];

export type ExportFormat = 'csv' | 'json';
export const EXPORT_TYPES: Record<ExportFormat, string> = { csv: 'text/csv', json: 'application/json' };

/** The media type a picked file is sent as, by its name or its type; null when it is neither CSV nor JSON. */
export function importTypeOf(file: { readonly name: string; readonly type: string }): string | null {
  const name = file.name.toLowerCase();
  if (name.endsWith('.json') || file.type === 'application/json') return EXPORT_TYPES.json;
  if (name.endsWith('.csv') || file.type === 'text/csv') return EXPORT_TYPES.csv;
  return null;
}

/** A row's result in words: a dry run says what would happen. */
export function importStatusLabel(status: ImportStatus, dryRun: boolean): string {
  switch (status) {
    case 'created':
      return dryRun ? 'Would be created' : 'Created';
    case 'taken':
      return 'Already taken';
    default:
      return 'Refused';
  }
}

const FIELD_NAMES: Record<string, string> = {
  code: 'The code',
  url: 'The URL',
  created_at: 'created_at',
  click_count: 'click_count',
  expires_at: 'expires_at',
  max_visits: 'max_visits',
};

/** A row's reason as a sentence: "'url' must not …" reads "The URL must not ….". */
export function importDetailText(detail: string | undefined): string {
  if (!detail) return '';
  const text = detail.trim().replace(/^'(\w+)'/, (_, name: string) => FIELD_NAMES[name] ?? name);
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}`.replace(/([^.!?])$/, '$1.');
}

const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** The report's totals in one sentence. */
export function importSummary({ dry_run: dryRun, totals }: ImportReport): string {
  const created = dryRun ? `${totals.created} would be created` : `${totals.created} created`;
  const head = dryRun
    ? `Checked ${count(totals.rows, 'row')}, nothing imported`
    : `Imported ${count(totals.rows, 'row')}`;
  return `${head}: ${created}, ${totals.taken} already taken, ${totals.refused} refused.`;
}

/** The rows to show first: problems (taken, refused) when there are any and `problemsOnly` is asked. */
export const rowsToShow = (report: ImportReport, problemsOnly: boolean): ImportRow[] =>
  problemsOnly ? report.rows.filter((r) => r.status !== 'created') : report.rows;

/** The file name an export is saved as when the server names none: `links-2026-11-25.csv`. */
export const exportFileName = (format: ExportFormat, now: Date) => `links-${now.toISOString().slice(0, 10)}.${format}`;
