import { type Context, context } from '@opentelemetry/api';
import { type Kysely, sql } from 'kysely';
import { errors } from '../../domain/errors.js';
import type { EventsFor } from '../../domain/events.js';
import { type NewUrlMapping, storedInstant, type UrlMapping } from '../../domain/url-mapping.js';
import type { EncodedMessage, TransactionalOutbox } from '../event-bus/outbox.js';
import { isDatabaseUnavailable } from './connection-errors.js';
import type { DatabaseSchema } from './schema.js';

interface PendingCreate {
  readonly mapping: NewUrlMapping;
  readonly events: EventsFor<UrlMapping> | undefined;
  /** The caller's trace context: its event's trace headers are made in it. */
  readonly context: Context;
  readonly resolve: (row: UrlMapping) => void;
  readonly reject: (error: unknown) => void;
}

/** Creates one mapping with its events in a transaction of its own (the repository's single path). */
export type CreateOne = (mapping: NewUrlMapping, events: EventsFor<UrlMapping> | undefined) => Promise<UrlMapping>;

/**
 * PostgreSQL: the creates that arrive during one turn of the event loop, or while the previous
 * batch commits, share one transaction: one multi-row `INSERT … ON CONFLICT (code) DO NOTHING
 * RETURNING`, their events appended together (each partition's offsets in one statement), one
 * commit. Concurrent creates otherwise queue one by one on the log partitions' counters, each
 * holding its partition until its commit. Every caller still gets its own outcome: its row once
 * the batch has committed, or CODE_CONFLICT when the code was taken (before, or by an earlier
 * create of the same batch). A batch that fails as a whole runs again one create at a time, so
 * that an error reaches only the create it belongs to, unless the database is away: then every
 * create of the batch fails with that error at once.
 */
export class BatchedCreates {
  private queue: PendingCreate[] = [];
  /** Batches in flight (one by default: a batch holds the log partitions it appends to until its commit, so a second would mostly wait, and split the requests into smaller batches). */
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly outbox: TransactionalOutbox | undefined,
    private readonly createOne: CreateOne,
    /** Most creates one transaction takes; the rest wait for the next. */
    private readonly maxBatch = 256,
    private readonly maxInFlight = 1,
  ) {}

  create(mapping: NewUrlMapping, events: EventsFor<UrlMapping> | undefined): Promise<UrlMapping> {
    return new Promise<UrlMapping>((resolve, reject) => {
      this.queue.push({ mapping, events, context: context.active(), resolve, reject });
      this.schedule();
    });
  }

  /** A batch starts after this turn's other requests have queued theirs, when fewer than `maxInFlight` run. */
  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight || this.queue.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (this.inFlight >= this.maxInFlight || this.queue.length === 0) return;
      this.inFlight++;
      void this.run(this.queue.splice(0, this.maxBatch)).finally(() => {
        this.inFlight--;
        this.schedule();
      });
      this.schedule();
    });
  }

  private async run(batch: readonly PendingCreate[]): Promise<void> {
    if (batch.length > 1) return this.commitBatch(batch);
    const [only] = batch as [PendingCreate];
    await context.with(only.context, () => this.createOne(only.mapping, only.events)).then(only.resolve, only.reject);
  }

  private async commitBatch(batch: readonly PendingCreate[]): Promise<void> {
    let outcomes: (UrlMapping | undefined)[];
    try {
      outcomes = this.outbox
        ? await this.outbox.transactAll(this.db, (trx, record) => this.insert(trx, batch, record))
        : await this.db.transaction().execute((trx) => this.insert(trx, batch, () => undefined));
    } catch (error) {
      // The database away: every create of the batch answers so at once (503), none retried.
      if (isDatabaseUnavailable(error)) {
        for (const p of batch) p.reject(error);
        return;
      }
      // Each on its own: the one whose error it was sees it, the others commit.
      for (const p of batch) {
        await context.with(p.context, () => this.createOne(p.mapping, p.events)).then(p.resolve, p.reject);
      }
      return;
    }
    batch.forEach((p, i) => {
      const row = outcomes[i];
      if (row) p.resolve(row);
      else p.reject(errors.codeConflict());
    });
  }

  /** Inserts the batch; each create's row (undefined: its code was taken), its events recorded. */
  private async insert(
    trx: Kysely<DatabaseSchema>,
    batch: readonly PendingCreate[],
    record: (messages: readonly EncodedMessage[]) => void,
  ): Promise<(UrlMapping | undefined)[]> {
    const column = <K extends keyof NewUrlMapping>(key: K) => batch.map((p) => p.mapping[key] ?? null);
    const expiresAt = batch.map((p) => (p.mapping.expiresAt ? storedInstant(p.mapping.expiresAt) : null));
    const { rows } = await sql<UrlMapping>`
      INSERT INTO url_mappings (code, url, created_at, click_count, owner_id, expires_at, max_visits)
      SELECT * FROM unnest(CAST(${column('code')} AS TEXT[]), CAST(${column('url')} AS TEXT[]),
        CAST(${column('created_at')} AS TIMESTAMPTZ[]), CAST(${column('click_count')} AS BIGINT[]),
        CAST(${column('owner')} AS BIGINT[]), CAST(${expiresAt} AS TIMESTAMPTZ[]), CAST(${column('maxVisits')} AS BIGINT[]))
      ON CONFLICT (code) DO NOTHING
      RETURNING id, code, url, created_at, click_count, owner_id AS owner, expires_at, max_visits`.execute(trx);
    const byCode = new Map(rows.map((row) => [row.code, row]));
    return batch.map((p) => {
      const row = byCode.get(p.mapping.code);
      // The first create of a code in the batch got the row; a later one of the same code did not.
      byCode.delete(p.mapping.code);
      if (row && p.events && this.outbox) {
        const outbox = this.outbox;
        const events = p.events;
        record(context.with(p.context, () => outbox.messages(events(row))));
      }
      return row;
    });
  }
}
