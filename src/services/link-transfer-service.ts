import { errors } from '../domain/errors.js';
import {
  checkRow,
  codeOf,
  type ImportedLink,
  type ImportReport,
  type LinkRecord,
  type RawRow,
  type RowOutcome,
  type RowRules,
} from '../domain/link-transfer.js';
import { canonicalTimestamp } from '../domain/timestamp.js';
import type { UrlEventFactory } from '../domain/url-events.js';
import type { UrlMapping, UrlRules } from '../domain/url-mapping.js';
import type { CountReader, PendingClicks } from '../support/click-buffer.js';
import type { Clock } from '../ports/clock.js';
import type { LinkImportStore } from '../ports/link-import-store.js';
import type { UrlMappingRepository } from '../ports/url-mapping-repository.js';
import type { Caller } from './execution-service.js';

export interface LinkTransferOptions {
  readonly rules: UrlRules;
  /** Lower-case first path segments of the service's own routes; codes equal to one are refused. */
  readonly reservedCodes: () => ReadonlySet<string>;
  /** When set, every imported link records its `url.created` event in its batch's transaction. */
  readonly events?: UrlEventFactory;
  /** `created_at` of rows without one; the system clock when absent. */
  readonly clock?: Clock;
  /** Reads exported counts with the clicks counted in this process and not yet written (the click buffer). */
  readonly counts?: CountReader;
  /** Told of each code created (the redirect cache drops a cached "unknown code"). */
  readonly created?: (code: string) => void;
  /** Links per transaction of an import (2,000 when absent). */
  readonly batchSize?: number;
  /** Links per page of an export (1,000 when absent). */
  readonly pageSize?: number;
}

export interface ImportOptions {
  /** The owner of the imported links (the caller); null: anonymous (the command line without --owner). */
  readonly owner: number | null;
  /** Checks every row and writes nothing. */
  readonly dryRun?: boolean;
  /** More data rows than this: refused as a whole before anything is written (413). */
  readonly maxRows?: number;
  /** Each row's outcome as soon as it is final, in row order; the report then holds no rows. */
  readonly onRow?: (outcome: RowOutcome) => void;
  /** After each batch: the rows finished so far. */
  readonly onProgress?: (rows: number) => void;
}

const DEFAULT_BATCH = 2000;
const DEFAULT_PAGE = 1000;

/** A row read and checked, waiting for its batch: its link to write, or its outcome already. */
interface Pending {
  readonly row: number;
  readonly code: string | null;
  readonly link?: ImportedLink;
  outcome?: RowOutcome;
}

/**
 * Export and import of links (README "Import and export"). An export reads a page at a time, so
 * it holds one page whatever the number of links. An import checks each row with the rules of
 * the create routes and writes the good ones a batch per transaction, each created link with its
 * `url.created` event as a single create writes it; a row is reported `created` only once its
 * batch has committed. When the database fails, the rows after the last committed batch are
 * refused (nothing of them is written) and the report says where it stopped.
 */
export class LinkTransferService {
  constructor(
    private readonly repository: Pick<UrlMappingRepository, 'list'>,
    private readonly store: LinkImportStore,
    private readonly options: LinkTransferOptions,
  ) {}

  /** Whose links `caller` exports: an administrator's export holds every link, anyone else's their own. */
  static ownerScope(caller: Caller): number | undefined {
    return caller.role === 'admin' ? undefined : caller.userId;
  }

  /** Every link (of `owner` when given) in id order, read a page at a time. */
  async *exportLinks(owner?: number): AsyncGenerator<LinkRecord> {
    const limit = this.options.pageSize ?? DEFAULT_PAGE;
    let after: number | undefined;
    for (;;) {
      const read = () =>
        this.repository.list({
          limit,
          ...(after === undefined ? {} : { after }),
          ...(owner === undefined ? {} : { owner }),
        });
      // Each page's counts are taken when it is read, not as the consumer gets to each row.
      const toRecords = (rows: UrlMapping[], pending?: PendingClicks) => ({
        records: rows.map((row) => record(row, pending)),
        last: rows.at(-1)?.id,
      });
      const counts = this.options.counts;
      const { records, last } = counts ? await counts.readCounts(read, toRecords) : toRecords(await read());
      yield* records;
      if (records.length < limit) return;
      after = last;
    }
  }

  /** Imports the rows (see the class); the report, its rows in row order unless `onRow` takes them. */
  async importLinks(source: AsyncIterable<RawRow> | Iterable<RawRow>, options: ImportOptions): Promise<ImportReport> {
    const rows = options.maxRows === undefined ? source : await collectAtMost(source, options.maxRows);
    const dryRun = options.dryRun === true;
    const run: ImportRun = {
      rules: { urls: this.options.rules, reservedCodes: this.options.reservedCodes() },
      now: canonicalTimestamp(new Date(this.options.clock?.now() ?? Date.now()).toISOString())!,
      owner: options.owner,
      firstRow: new Map(),
    };
    const batchSize = this.options.batchSize ?? DEFAULT_BATCH;
    const totals = { rows: 0, created: 0, taken: 0, refused: 0 };
    const reported: RowOutcome[] = [];
    let window: Pending[] = [];
    let linksInWindow = 0;

    const flush = async () => {
      const waiting = window.filter((p): p is Pending & { link: ImportedLink } => p.link !== undefined && !p.outcome);
      if (waiting.length > 0) {
        try {
          const outcomes = await this.write(
            waiting.map((p) => p.link),
            dryRun,
          );
          waiting.forEach((p, i) => (p.outcome = outcomes[i]!(p.row, p.link.code)));
        } catch (error) {
          const row = waiting[0]!.row;
          const last = waiting.at(-1)!.row;
          run.failure = {
            row,
            detail:
              `The database failed at row ${row} (${(error as Error).message}): the rows reported created are stored, ` +
              `no row after rows ${row} to ${last} (the batch being written) is, and that batch is not either unless ` +
              `the connection dropped as it committed (its answer lost). Import the file again to add the rest: ` +
              `the rows stored show as taken.`,
          };
          for (const p of waiting) p.outcome = notImported(p.row, p.link.code, row);
        }
      }
      for (const { outcome } of window) {
        totals[outcome!.status]++;
        if (options.onRow) options.onRow(outcome!);
        else reported.push(outcome!);
      }
      window = [];
      linksInWindow = 0;
      options.onProgress?.(totals.rows);
    };

    for await (const raw of rows) {
      totals.rows++;
      const pending = checked(raw, totals.rows, run);
      window.push(pending);
      if (pending.link) linksInWindow++;
      // Refused rows are reported in batches too, so that a file of them still shows progress.
      if (linksInWindow >= batchSize || window.length >= batchSize * 4) await flush();
    }
    await flush();
    const stopped = run.failure;
    return { dry_run: dryRun, totals, rows: reported, ...(stopped === undefined ? {} : { detail: stopped.detail }) };
  }

  /** Writes one batch (or, in a dry run, checks which codes are taken); each link's outcome. */
  private async write(
    links: readonly ImportedLink[],
    dryRun: boolean,
  ): Promise<((row: number, code: string) => RowOutcome)[]> {
    const created = (row: number, code: string): RowOutcome => ({ row, code, status: 'created' });
    const taken = (row: number, code: string): RowOutcome => ({
      row,
      code,
      status: 'taken',
      detail: 'the code is taken',
    });
    if (dryRun) {
      const codes = await this.store.takenCodes(links.map((l) => l.code));
      return links.map((l) => (codes.has(l.code) ? taken : created));
    }
    const events = this.options.events;
    const rows = await this.store.insertMany(links, events && ((row) => [events.created(row)]));
    return rows.map((row) => {
      if (row === undefined) return taken;
      this.options.created?.(row.code);
      return created;
    });
  }
}

/** A stored link as exported, with the clicks on it not written yet. */
function record(row: UrlMapping, pending?: PendingClicks): LinkRecord {
  return {
    code: row.code,
    url: row.url,
    created_at: row.created_at,
    click_count: row.click_count + (pending?.(row.id) ?? 0),
    expires_at: row.expires_at ?? null,
    max_visits: row.max_visits ?? null,
  };
}

/** What an import run knows while it reads its rows. */
interface ImportRun {
  readonly rules: RowRules;
  /** `created_at` of the rows without one. */
  readonly now: string;
  readonly owner: number | null;
  /** The row each code was first seen in: a later row of the same code is `taken`. */
  readonly firstRow: Map<string, number>;
  /** Why the import stopped writing (the database failed), and at which row. */
  failure?: { readonly detail: string; readonly row: number };
}

/** A row as read: refused, taken by an earlier row, not imported after a failure, or a link to write. */
function checked(raw: RawRow, row: number, run: ImportRun): Pending {
  const result = checkRow(raw, run.rules, run.now);
  if ('refused' in result) {
    const code = codeOf(raw);
    return { row, code, outcome: { row, code, status: 'refused', detail: result.refused } };
  }
  const { code } = result;
  const first = run.firstRow.get(code);
  if (first !== undefined) {
    return {
      row,
      code,
      outcome: { row, code, status: 'taken', detail: `the code is taken by row ${first} of this file` },
    };
  }
  if (run.failure !== undefined) return { row, code, outcome: notImported(row, code, run.failure.row) };
  run.firstRow.set(code, row);
  return { row, code, link: { ...result, owner: run.owner } };
}

const notImported = (row: number, code: string, failedAt: number): RowOutcome => ({
  row,
  code,
  status: 'refused',
  detail: `not imported: the database failed at row ${failedAt}`,
});

/** The rows, read whole, or a 413 as soon as there are more than `max`. */
async function collectAtMost(source: AsyncIterable<RawRow> | Iterable<RawRow>, max: number): Promise<RawRow[]> {
  const rows: RawRow[] = [];
  for await (const row of source) {
    if (rows.length === max) throw errors.tooManyImportRows(max);
    rows.push(row);
  }
  return rows;
}
