import { type Kysely, type Selectable, sql } from 'kysely';
import {
  CUT_MARKERS,
  type Execution,
  type ExecutionOutcome,
  type ExecutionRequestedPayload,
} from '../../domain/execution.js';
import { canonicalTimestamp } from '../../domain/timestamp.js';
import type { ExecutionClaim, ExecutionRepository } from '../../ports/execution-repository.js';
import type { EventsFor } from '../../domain/events.js';
import type { TransactionalOutbox } from '../event-bus/outbox.js';
import type { Dialect } from './database.js';
import { insertWithinLimit } from './per-user-limit.js';
import type { DatabaseSchema, ExecutionsTable } from './schema.js';

/** Serialises one user's submissions on PostgreSQL (with the user id as the lock's second key). */
const PENDING_LOCK_CLASS = 0x45584543; // "EXEC"

const LIST_SCRIPT_MARKER = '\n[script truncated]';

const now = () => canonicalTimestamp(new Date().toISOString())!;

function toExecution(row: Selectable<ExecutionsTable>): Execution {
  const { claimed_by: _claimant, ...rest } = row;
  return {
    ...rest,
    claimed_until: row.claimed_until === null ? null : Number(row.claimed_until),
    user_id: Number(row.user_id),
    language: row.language as Execution['language'],
    result: row.result === null ? null : (JSON.parse(row.result) as unknown),
    attempt: Number(row.attempt),
    truncated: Boolean(row.truncated),
  };
}

type PreviewRow = Omit<Selectable<ExecutionsTable>, 'claimed_by'> & {
  script_length: number;
  output_length: number;
  result_length: number | null;
  error_length: number | null;
};

/** A list row: each long text was read cut to `chars` characters; it gets its marker here. */
function toPreview(row: PreviewRow, chars: number): Execution {
  const { script_length, output_length, result_length, error_length, ...columns } = row;
  const long = (length: number | null) => length !== null && Number(length) > chars;
  const cut = (text: string, length: number, marker: string) => (long(length) ? text + marker : text);
  const resultCut = long(result_length);
  const execution = toExecution({
    ...columns,
    result: resultCut ? null : columns.result,
    claimed_by: null,
  });
  return {
    ...execution,
    script: cut(columns.script, script_length, LIST_SCRIPT_MARKER),
    output: cut(columns.output, output_length, CUT_MARKERS.output),
    result: resultCut ? columns.result! + CUT_MARKERS.result : execution.result,
    error: columns.error === null ? null : cut(columns.error, error_length!, CUT_MARKERS.error),
    truncated: execution.truncated || [script_length, output_length, result_length, error_length].some(long),
  };
}

/** Executions in SQLite or PostgreSQL; each state change records its event in the same transaction. */
export class KyselyExecutionRepository implements ExecutionRepository {
  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly dialect: Dialect,
    private readonly outbox: TransactionalOutbox,
  ) {}

  async create(
    request: ExecutionRequestedPayload,
    maxPending: number,
    events: EventsFor<Execution>,
  ): Promise<Execution | undefined> {
    // One submission of a user at a time, across instances.
    return insertWithinLimit(
      (change) => this.inTransaction(events, change),
      { dialect: this.dialect, lockClass: PENDING_LOCK_CLASS, userId: request.user_id, max: maxPending },
      async (trx) =>
        toExecution(
          await trx
            .insertInto('executions')
            .values({
              id: request.execution_id,
              user_id: request.user_id,
              language: request.language,
              script: request.script,
              timeout_ms: request.timeout_ms,
              status: 'queued',
              output: '',
              created_at: now(),
            })
            .returningAll()
            .executeTakeFirstOrThrow(),
        ),
      async (trx) => {
        const { pending } = await trx
          .selectFrom('executions')
          .select((eb) => eb.fn.countAll<number>().as('pending'))
          .where('user_id', '=', request.user_id)
          .where('status', 'in', ['queued', 'running'])
          .executeTakeFirstOrThrow();
        return Number(pending);
      },
    );
  }

  async get(id: string): Promise<Execution | undefined> {
    const row = await this.db.selectFrom('executions').selectAll().where('id', '=', id).executeTakeFirst();
    return row && toExecution(row);
  }

  async listByUser(userId: number, options: { limit: number; before?: string; previewChars: number }) {
    const chars = options.previewChars;
    const head = (column: 'script' | 'output' | 'result' | 'error') =>
      sql<string>`substr(${sql.ref(column)}, 1, ${chars})`.as(column);
    const length = (column: 'script' | 'output' | 'result' | 'error') =>
      sql<number>`length(${sql.ref(column)})`.as(`${column}_length`);
    let query = this.db
      .selectFrom('executions')
      .select(['id', 'user_id', 'language', 'timeout_ms', 'status', 'duration_ms', 'attempt', 'truncated'])
      .select('claimed_until')
      .select(['created_at', 'started_at', 'finished_at'])
      .select([head('script'), head('output'), head('result'), head('error')])
      .select([length('script'), length('output'), length('result'), length('error')])
      .where('user_id', '=', userId)
      .orderBy('id', 'desc')
      .limit(options.limit);
    if (options.before !== undefined) query = query.where('id', '<', options.before);
    return (await query.execute()).map((row) => toPreview(row as PreviewRow, chars));
  }

  claim(id: string, claim: ExecutionClaim, events: EventsFor<Execution>): Promise<Execution | undefined> {
    return this.inTransaction(events, async (trx) => {
      const row = await trx
        .updateTable('executions')
        .set((eb) => ({
          status: 'running',
          attempt: eb('attempt', '+', 1),
          claimed_by: claim.claimant,
          claimed_until: claim.until,
          started_at: now(),
        }))
        .where('id', '=', id)
        .where((eb) =>
          eb.or([
            eb('status', '=', 'queued'),
            eb.and([
              eb('status', '=', 'running'),
              eb.or([eb('claimed_until', 'is', null), eb('claimed_until', '<=', claim.now)]),
            ]),
          ]),
        )
        .returningAll()
        .executeTakeFirst();
      return row && toExecution(row);
    });
  }

  async renew(id: string, attempt: number, until: number): Promise<boolean> {
    const result = await this.db
      .updateTable('executions')
      .set({ claimed_until: until })
      .where('id', '=', id)
      .where('attempt', '=', attempt)
      .where('status', '=', 'running')
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  async finish(id: string, attempt: number, outcome: ExecutionOutcome, events: EventsFor<Execution>) {
    const updated = await this.inTransaction(events, async (trx) => {
      const row = await trx
        .updateTable('executions')
        .set({
          status: outcome.status,
          output: outcome.output,
          result: outcome.result === undefined ? null : JSON.stringify(outcome.result),
          error: outcome.error,
          truncated: outcome.truncated ? 1 : 0,
          duration_ms: outcome.duration_ms,
          finished_at: now(),
          claimed_until: null,
        })
        .where('id', '=', id)
        .where('attempt', '=', attempt)
        .where('status', '=', 'running')
        .returningAll()
        .executeTakeFirst();
      return row && toExecution(row);
    });
    return updated !== undefined;
  }

  private inTransaction<T>(events: EventsFor<NonNullable<T>>, change: (trx: Kysely<DatabaseSchema>) => Promise<T>) {
    return this.outbox.transact(this.db, events, change);
  }
}
