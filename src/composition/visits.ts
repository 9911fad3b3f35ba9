import { setTimeout as sleep } from 'node:timers/promises';
import type { Database } from '../adapters/storage/database.js';
import { KyselyVisitJournal } from '../adapters/storage/kysely-visit-journal.js';
import { KyselyVisitRepository } from '../adapters/storage/kysely-visit-repository.js';
import { tracedVisitWrites } from '../adapters/telemetry/background-spans.js';
import { journalGauges } from '../adapters/telemetry/visit-metrics.js';
import { DAY_MS, dayOf } from '../domain/visit.js';
import { decodeJournal, type JournalPart, JournalMerge } from '../domain/visit-journal.js';
import type { UrlMappingRepository } from '../ports/url-mapping-repository.js';
import type { VisitJournal } from '../ports/visit-journal.js';
import type { VisitRepository } from '../ports/visit-repository.js';
import { VisitStatsService } from '../services/visit-stats-service.js';
import { BatchSizer } from '../support/batch-sizer.js';
import { PeriodicTask } from '../support/periodic-task.js';
import { UserAgentClassifier } from '../support/user-agents.js';
import { VisitBuffer } from '../support/visit-buffer.js';
import type { CompositionContext } from './context.js';

/** How many segments each of retention's deletes takes (at most RETENTION_CHUNKS a run, every VISIT_RETENTION_INTERVAL_MS). */
const RETENTION_CHUNK = 1_000;
const RETENTION_CHUNKS = 20;
/**
 * Visits a merge reads from the journal at a time (decoded in memory together: tens of bytes
 * each), and what one of its transactions writes at most: MERGE_SIZING's segments (and their day
 * rows), and 50,000 visits, which bound its text.
 */
const MERGE_VISITS = 200_000;
const MERGE_GROUP = { rows: 300, visits: 50_000 } as const;
/**
 * How many segments one merge transaction writes (each ending at a link's last): as many as hold
 * the event loop for about `targetMs`, as for the fold's steps (FOLD_SIZING) and for the same
 * reasons. On SQLite that is the transaction's whole time; on PostgreSQL its JavaScript only, so
 * its steps grow to thousands of segments: a few transactions a run, not a hundred (each with its
 * commit; bench/PROFILE.md). It starts small and grows a quarter a step: a first step of 300
 * links of a busy service's journal held SQLite's event loop for 60-70 ms, and the next (made
 * before the first had reported) as long again.
 */
export const MERGE_SIZING = { initial: 25, min: 1, max: 20_000, targetMs: 2 } as const;
/**
 * How often the journal is merged into segments, which are added to their day rows as they are
 * written, and the day rows caught up from any segments written unfolded (a batch's: migrations'
 * data; every instance tries; what one merges or folds the others do not). A link's day row is
 * then read, merged and written once every few seconds, not once every flush: that was the largest
 * part of what recording a visit cost where many links are followed.
 */
const FOLD_INTERVAL_MS = 5_000;
/**
 * How many segments one fold transaction takes (it ends at a link's last): as many as fit in about
 * `targetMs`, since the transaction holds the event loop that long on SQLite (better-sqlite3 is
 * synchronous), and its JavaScript does on either backend. 250 links a transaction took tens of ms
 * where each link had many visits, which redirects waiting behind it saw as their p99
 * (bench/PROFILE.md).
 */
export const FOLD_SIZING = { initial: 250, min: 1, max: 20_000, targetMs: 2 } as const;
/** Batch ids are kept this long: far longer than any flush is retried. */
const BATCH_IDS_KEPT_MS = DAY_MS;

export interface Visits {
  /** Undefined when VISIT_RECORDING is false. */
  readonly buffer: VisitBuffer | undefined;
  readonly repository: KyselyVisitRepository;
  readonly journal: KyselyVisitJournal;
  readonly stats: VisitStatsService;
  /** COUNT_BOTS=false: the bot test the redirect path leaves bots out of `click_count` by. */
  readonly isBot: ((userAgent: string | undefined) => boolean) | undefined;
  /**
   * One retention run now (tests), after `fold()`: what VISIT_RETENTION_DAYS drops, in chunks; how
   * many visits.
   */
  prune(): Promise<number>;
  /**
   * Merges the journal into segments (tests); how many visits this instance merged. Returns once
   * every row written before the call is merged, by this instance or by another's merge that was
   * under way (the background fold's, or another instance's), which a merge run stops for.
   */
  merge(): Promise<number>;
  /**
   * Merges the journal into segments (added to their day rows as they are written) and folds
   * every unfolded segment written so far into the day rows (tests); how many segments this
   * instance folded. Returns, as `merge()` does, once what was written before the call is merged
   * and folded, by this instance or by another's run that had taken some of it.
   */
  fold(): Promise<number>;
}

/**
 * Visit recording (the buffer, flushed to the journal every VISIT_FLUSH_INTERVAL_MS, with the
 * clicks unless set, its last visits written when the service stops), the merge of the journal
 * into segments and day rows and the fold of unfolded segments (every FOLD_INTERVAL_MS, and once
 * more after the last flush), retention, and the statistics service.
 */
export function composeVisits(
  { config, stack, logger, metrics }: CompositionContext,
  database: Database,
  mappings: Pick<UrlMappingRepository, 'findByCode'>,
  { background = true }: { background?: boolean } = {},
): Visits {
  const settings = config.visits;
  // Visits are stamped by the system clock, not a test's manual one: their times are real.
  const repository = new KyselyVisitRepository(database.db, database.dialect);
  const journal = new KyselyVisitJournal(database.db, database.dialect);
  const writes = tracedIf(config.tracing.enabled, repository, journal);
  const classifier = new UserAgentClassifier();
  const sizer = new BatchSizer(FOLD_SIZING);
  const mergeSizer = new BatchSizer(MERGE_SIZING);
  const merge = () => mergeJournal(writes, MERGE_GROUP, mergeSizer);
  const fold = async () => {
    await merge();
    return foldAll(writes, sizer);
  };
  // Not in a command-line run (`background: false`): the merge, its gauges, the fold. Registered
  // before the buffer's flush, so that on stop it runs after it: the last visits written are merged
  // and folded too.
  if (background) {
    journalGauges(metrics.registry, () => journal.backlog());
    const folding = new PeriodicTask('visit fold', FOLD_INTERVAL_MS, fold, logger);
    folding.start();
    stack.defer('visit fold', async () => {
      await folding.stop();
      await folding.run();
    });
  }
  let buffer: VisitBuffer | undefined;
  if (settings.recording && config.role !== 'worker') {
    buffer = new VisitBuffer(writes, {
      flushIntervalMs: settings.flushIntervalMs,
      countryHeader: settings.countryHeader,
      classifier,
    });
    buffer.start(logger);
    const started = buffer;
    stack.defer('visit flush', () => started.stop());
  }
  const prune = async () => {
    // Only folded segments go (their visits are in their day rows); in a running service they all
    // are, minutes before retention could take them, but a run now (tests) folds first.
    await fold();
    return pruneVisits(writes, settings.retentionDays);
  };
  // Not in a command-line run (`background: false`): a serving process prunes.
  if (background) {
    const retention = new PeriodicTask('visit retention', settings.retentionIntervalMs, prune, logger);
    retention.start();
    stack.defer('visit retention', () => retention.stop());
  }
  return {
    buffer,
    repository,
    journal,
    stats: new VisitStatsService(mappings, repository, settings.retentionDays),
    isBot: settings.countBots ? undefined : (userAgent) => classifier.isBot(userAgent),
    ...testHooks(writes, repository, merge, () => foldAll(writes, sizer), settings.retentionDays),
  };
}

/**
 * `prune`, `merge` and `fold` for tests: each returns once what was written before the call is
 * merged (and folded), by this instance's run or by another's that had taken some of it.
 */
function testHooks(
  writes: VisitWrites & Pick<VisitJournal, 'mark' | 'pending'>,
  repository: Pick<VisitRepository, 'foldMark' | 'unfoldedUpTo'>,
  merge: () => Promise<number>,
  foldRun: () => Promise<number>,
  retentionDays: number,
): Pick<Visits, 'prune' | 'merge' | 'fold'> {
  const fold = async () => {
    await mergeWritten(writes, merge);
    const upTo = await repository.foldMark();
    return untilDone(foldRun, async () => !(await repository.unfoldedUpTo(upTo)), `unfolded segments up to ${upTo}`);
  };
  return {
    prune: async () => {
      await fold();
      return pruneVisits(writes, retentionDays);
    },
    merge: () => mergeWritten(writes, merge),
    fold,
  };
}

type VisitWrites = Pick<VisitRepository, 'foldMark' | 'fold' | 'prune'>;

/** The repository and the journal as one, each write in a span of its own when tracing is on. */
function tracedIf(enabled: boolean, repository: KyselyVisitRepository, journal: KyselyVisitJournal) {
  const writes = {
    daySalt: (day: number) => repository.daySalt(day),
    foldMark: () => repository.foldMark(),
    fold: (segments: number, upTo: number, after: number) => repository.fold(segments, upTo, after),
    prune: (options: Parameters<VisitRepository['prune']>[0]) => repository.prune(options),
    write: (entry: Parameters<VisitJournal['write']>[0]) => journal.write(entry),
    mark: () => journal.mark(),
    pending: (visits: number, upTo?: number) => journal.pending(visits, upTo),
    merge: (step: Parameters<VisitJournal['merge']>[0]) => journal.merge(step),
  };
  return enabled ? tracedVisitWrites(writes) : writes;
}

/** How long `untilDone` waits for another instance's run between its tries, and how long in all. */
const DONE_WAIT_MS = 10;
const DONE_WAIT_LIMIT_MS = 30_000;

/**
 * `run` until `done`, summing what each run returns: a merge or fold run leaves what another is
 * working on to it (a merge stops when it finds another merging; a fold step skips the segments
 * another holds), so one run alone may return before what it was asked for is merged or folded.
 */
async function untilDone(run: () => Promise<number>, done: () => Promise<boolean>, what: string): Promise<number> {
  const deadline = Date.now() + DONE_WAIT_LIMIT_MS;
  let total = 0;
  for (;;) {
    total += await run();
    if (await done()) return total;
    if (Date.now() > deadline) throw new Error(`${what} still there after ${DONE_WAIT_LIMIT_MS} ms`);
    await sleep(DONE_WAIT_MS);
  }
}

/** `merge` until no journal row written before the call is left; how many visits this instance merged. */
async function mergeWritten(
  journal: Pick<VisitJournal, 'mark' | 'pending'>,
  merge: () => Promise<number>,
): Promise<number> {
  const upTo = await journal.mark();
  return untilDone(
    merge,
    async () => (await journal.pending(1, upTo)).length === 0,
    `visit journal rows up to ${upTo}`,
  );
}

/**
 * Merges the journal's rows written so far into segments (src/domain/visit-journal.ts), the
 * oldest first, `limit` a transaction (its segments `sizer`'s instead, when given); how many
 * visits. Not the rows written meanwhile: a run that took them too would go on as long as flushes
 * keep coming, a row or two at a time, and add to each link's day row at every flush instead of
 * once a run. Stops when another instance is merging (a step finds its rows moved on): that one
 * goes on with them.
 */
export async function mergeJournal(
  journal: Pick<VisitJournal, 'mark' | 'pending' | 'merge'>,
  limit: { readonly rows: number; readonly visits: number } = MERGE_GROUP,
  sizer?: BatchSizer,
): Promise<number> {
  const upTo = await journal.mark();
  let merged = 0;
  for (;;) {
    const rows = await journal.pending(MERGE_VISITS, upTo);
    if (rows.length === 0) return merged;
    const parts: JournalPart[] = [];
    for (const row of rows) {
      parts.push({ visits: decodeJournal(row.data), mergedThrough: row.mergedThrough });
      await nextTurn();
    }
    let marks = rows.map(({ id, mergedThrough }) => ({ id, mergedThrough }));
    const merge = new JournalMerge(parts, limit);
    const take = () => {
      const started = performance.now();
      const asked = sizer ? { rows: sizer.size, visits: limit.visits } : limit;
      const group = merge.take(asked);
      // Full: cut at a bound, not at the end of what was read (which says nothing of a full one's time).
      const full = group !== undefined && (group.rows.length >= asked.rows || group.visits >= asked.visits);
      return { group, ms: performance.now() - started, full };
    };
    for (let { group, ms: tookMs, full } = take(); ;) {
      // The next group is made before this one is written: the last step is the one with no next.
      const next = group === undefined ? undefined : take();
      // The last step deletes the rows: every link of theirs is in segments once it commits.
      const through = next?.group === undefined ? undefined : group!.through;
      const done = await journal.merge({ rows: marks, through, segments: group?.rows ?? [] });
      if (done === undefined) return merged;
      // Its segments were made in one go too (JournalMerge's take), holding the loop as long.
      if (group !== undefined) sizer?.took(tookMs + done.heldMs, full);
      merged += group?.visits ?? 0;
      if (through === undefined) break;
      marks = marks.map(({ id, mergedThrough }) => ({ id, mergedThrough: Math.max(mergedThrough, through) }));
      ({ group, ms: tookMs, full } = next!);
      await nextTurn();
    }
  }
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** Folds the segments written so far (not those that arrive meanwhile), `sizer`'s segments a transaction. */
export async function foldAll(writes: Pick<VisitWrites, 'foldMark' | 'fold'>, sizer: BatchSizer): Promise<number> {
  const upTo = await writes.foldMark();
  if (upTo === 0) return 0;
  let folded = 0;
  for (let after = 0; ;) {
    const asked = sizer.size;
    const step = await writes.fold(asked, upTo, after);
    if (step.through === undefined) return folded;
    // (A step that found its range locked by another instance says nothing about a full one's time.)
    // Sized by what it held the event loop for, not by its wall time: on PostgreSQL the wall time
    // is mostly round trips, and under load each waits for the loop's next turn, so steps sized by
    // it shrank to one segment a transaction (seven statements for each segment folded).
    if (step.segments > 0) sizer.took(step.heldMs, step.segments >= asked);
    folded += step.segments;
    after = step.through;
    await new Promise((resolve) => setImmediate(resolve)); // requests get the writer in between
  }
}

/** One retention run: what `retentionDays` drops, in chunks; how many visits. */
async function pruneVisits(writes: VisitWrites, retentionDays: number): Promise<number> {
  const now = Date.now();
  let deleted = 0;
  for (let chunk = 0; chunk < RETENTION_CHUNKS; chunk++) {
    const { segments, visits } = await writes.prune({
      before: now - retentionDays * DAY_MS,
      hashesBefore: dayOf(now) - 1,
      batchesBefore: now - BATCH_IDS_KEPT_MS,
      limit: RETENTION_CHUNK,
    });
    deleted += visits;
    if (segments < RETENTION_CHUNK) break;
    await new Promise((resolve) => setImmediate(resolve)); // requests get the writer in between
  }
  return deleted;
}
