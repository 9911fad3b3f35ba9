import type { Database } from '../adapters/storage/database.js';
import { KyselyVisitRepository } from '../adapters/storage/kysely-visit-repository.js';
import { tracedVisitWrites } from '../adapters/telemetry/background-spans.js';
import { DAY_MS, dayOf } from '../domain/visit.js';
import type { UrlMappingRepository } from '../ports/url-mapping-repository.js';
import type { VisitRepository } from '../ports/visit-repository.js';
import { VisitStatsService } from '../services/visit-stats-service.js';
import { BatchSizer } from '../support/batch-sizer.js';
import { PeriodicTask } from '../support/periodic-task.js';
import { UserAgentClassifier } from '../support/user-agents.js';
import { VisitBuffer } from '../support/visit-buffer.js';
import type { CompositionContext } from './context.js';

/** How often retention runs, and how many segments each of its deletes takes (at most RETENTION_CHUNKS a run). */
const RETENTION_INTERVAL_MS = 60_000;
const RETENTION_CHUNK = 1_000;
const RETENTION_CHUNKS = 20;
/**
 * How often the day rows are caught up from the segments written since (every instance tries;
 * what one folds the others do not), and the segments one fold transaction takes. A link's day row is
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
  readonly stats: VisitStatsService;
  /** COUNT_BOTS=false: the bot test the redirect path leaves bots out of `click_count` by. */
  readonly isBot: ((userAgent: string | undefined) => boolean) | undefined;
  /** One retention run now (tests): what VISIT_RETENTION_DAYS drops, in chunks; how many visits. */
  prune(): Promise<number>;
  /** Folds every segment written so far into the day rows (tests); how many segments. */
  fold(): Promise<number>;
}

/**
 * Visit recording (the buffer, flushed every VISIT_FLUSH_INTERVAL_MS, with the clicks unless set, its last
 * visits written when the service stops), the fold of the day rows (every FOLD_INTERVAL_MS, and
 * once more after the last flush), retention, and the statistics service.
 */
export function composeVisits(
  { config, stack, logger }: CompositionContext,
  database: Database,
  mappings: Pick<UrlMappingRepository, 'findByCode'>,
  { background = true }: { background?: boolean } = {},
): Visits {
  const settings = config.visits;
  // Visits are stamped by the system clock, not a test's manual one: their times are real.
  const repository = new KyselyVisitRepository(database.db, database.dialect);
  const writes = config.tracing.enabled ? tracedVisitWrites(repository) : repository;
  const classifier = new UserAgentClassifier();
  const sizer = new BatchSizer(FOLD_SIZING);
  const fold = () => foldAll(writes, sizer);
  // Not in a command-line run (`background: false`). Registered before the buffer's flush, so that
  // on stop it runs after it: the last visits written are folded too.
  if (background) {
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
    const retention = new PeriodicTask('visit retention', RETENTION_INTERVAL_MS, prune, logger);
    retention.start();
    stack.defer('visit retention', () => retention.stop());
  }
  return {
    buffer,
    repository,
    stats: new VisitStatsService(mappings, repository, settings.retentionDays),
    isBot: settings.countBots ? undefined : (userAgent) => classifier.isBot(userAgent),
    prune,
    fold,
  };
}

type VisitWrites = Pick<VisitRepository, 'foldMark' | 'fold' | 'prune'>;

/** Folds the segments written so far (not those that arrive meanwhile), `sizer`'s segments a transaction. */
export async function foldAll(writes: Pick<VisitWrites, 'foldMark' | 'fold'>, sizer: BatchSizer): Promise<number> {
  const upTo = await writes.foldMark();
  if (upTo === 0) return 0;
  let folded = 0;
  for (let after = 0; ;) {
    const step = await writes.fold(sizer.size, upTo, after);
    if (step.through === undefined) return folded;
    // (A step that found its range locked by another instance says nothing about a full one's time.)
    // Sized by what it held the event loop for, not by its wall time: on PostgreSQL the wall time
    // is mostly round trips, and under load each waits for the loop's next turn, so steps sized by
    // it shrank to one segment a transaction (seven statements for each segment folded).
    if (step.segments > 0) sizer.took(step.heldMs);
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
