import { type Generated, type Kysely, type Migration, type Selectable, sql } from 'kysely';
import {
  CUT_MARKERS,
  type Execution,
  type ExecutionOutcome,
  type ExecutionRequestedPayload,
  type ExecutionStatus,
} from '../../domain/execution.js';
import { canonicalTimestamp } from '../../domain/timestamp.js';
import type { ExecutionClaim, ExecutionRepository } from '../../ports/execution-repository.js';
import type { EventsFor } from '../../domain/events.js';
import type { TransactionalOutbox } from '../event-bus/outbox.js';
import type { Dialect, AnyKysely } from './database.js';

interface ExecutionsTable {
  id: string;
  user_id: number;
  language: string;
  script: string;
  timeout_ms: number;
  status: ExecutionStatus;
  output: string;
  result: string | null;
  error: string | null;
  duration_ms: number | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** From 0052: runs started so far; the claim of the latest and until when it holds (ms). */
  attempt: Generated<number>;
  claimed_by: string | null;
  claimed_until: number | null;
  /** 1 when output, result or error was cut at its limit. */
  truncated: Generated<number>;
}
interface Tables {
  executions: ExecutionsTable;
}

export function executionMigrations(dialect: Dialect): Record<string, Migration> {
  const pg = dialect === 'postgres';
  const time = pg ? 'timestamptz' : 'text';
  return {
    '0020_executions': {
      async up(db: AnyKysely) {
        await db.schema
          .createTable('executions')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('user_id', pg ? 'bigint' : 'integer', (c) => c.notNull())
          .addColumn('language', 'text', (c) => c.notNull())
          .addColumn('script', 'text', (c) => c.notNull())
          .addColumn('timeout_ms', 'integer', (c) => c.notNull())
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('output', 'text', (c) => c.notNull().defaultTo(''))
          .addColumn('result', 'text')
          .addColumn('error', 'text')
          .addColumn('duration_ms', 'integer')
          .addColumn('created_at', time, (c) => c.notNull())
          .addColumn('started_at', time)
          .addColumn('finished_at', time)
          .execute();
        await db.schema.createIndex('executions_user').on('executions').columns(['user_id', 'id']).execute();
      },
    },
    '0052_execution_attempts': {
      async up(db: AnyKysely) {
        const columns: [string, 'integer' | 'text' | 'bigint', boolean][] = [
          ['attempt', 'integer', true],
          ['claimed_by', 'text', false],
          ['claimed_until', pg ? 'bigint' : 'integer', false],
          ['truncated', 'integer', true],
        ];
        for (const [name, type, counter] of columns) {
          await db.schema
            .alterTable('executions')
            .addColumn(name, type, (c) => (counter ? c.notNull().defaultTo(0) : c))
            .execute();
        }
        // What the per-user limit counts, without reading the user's finished executions.
        await db.schema
          .createIndex('executions_user_pending')
          .on('executions')
          .column('user_id')
          .where(sql.ref('status'), 'in', ['queued', 'running'])
          .execute();
      },
    },
  };
}

/** Serialises one user's submissions on PostgreSQL (with the user id as the lock's second key). */
const PENDING_LOCK_CLASS = 0x45584543; // "EXEC"

const LIST_SCRIPT_MARKER = '\n[script truncated]';

/** Thrown inside the transaction to roll back a submission over the user's limit. */
class OverTheLimit extends Error {}

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
  private readonly db: Kysely<Tables>;

  constructor(
    db: AnyKysely,
    private readonly dialect: Dialect,
    private readonly outbox: TransactionalOutbox,
  ) {
    this.db = db as Kysely<Tables>;
  }

  async create(
    request: ExecutionRequestedPayload,
    maxPending: number,
    events: EventsFor<Execution>,
  ): Promise<Execution | undefined> {
    try {
      return await this.inTransaction(events, async (trx) => {
        // One submission of a user at a time, across instances. On SQLite the insert comes first
        // and takes the database's one write lock, so the count after it is exact as it is.
        if (this.dialect === 'postgres') {
          await sql`select pg_advisory_xact_lock(${PENDING_LOCK_CLASS}, ${request.user_id % 2 ** 31})`.execute(trx);
        }
        const row = await trx
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
          .executeTakeFirstOrThrow();
        const { pending } = await trx
          .selectFrom('executions')
          .select((eb) => eb.fn.countAll<number>().as('pending'))
          .where('user_id', '=', request.user_id)
          .where('status', 'in', ['queued', 'running'])
          .executeTakeFirstOrThrow();
        if (Number(pending) > maxPending) throw new OverTheLimit();
        return toExecution(row);
      });
    } catch (error) {
      if (error instanceof OverTheLimit) return undefined;
      throw error;
    }
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

  private inTransaction<T>(events: EventsFor<NonNullable<T>>, change: (trx: Kysely<Tables>) => Promise<T>) {
    return this.outbox.transact(this.db, events, change);
  }
}
