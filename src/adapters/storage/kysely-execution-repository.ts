import type { Kysely, Migration, Selectable } from 'kysely';
import type {
  Execution,
  ExecutionOutcome,
  ExecutionRequestedPayload,
  ExecutionStatus,
} from '../../domain/execution.js';
import { canonicalTimestamp } from '../../domain/timestamp.js';
import type { ExecutionRepository } from '../../ports/execution-repository.js';
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
  };
}

const now = () => canonicalTimestamp(new Date().toISOString())!;

function toExecution(row: Selectable<ExecutionsTable>): Execution {
  return {
    ...row,
    user_id: Number(row.user_id),
    language: row.language as Execution['language'],
    result: row.result === null ? null : (JSON.parse(row.result) as unknown),
  };
}

/** Executions in SQLite or PostgreSQL; each state change records its event in the same transaction. */
export class KyselyExecutionRepository implements ExecutionRepository {
  private readonly db: Kysely<Tables>;

  constructor(
    db: AnyKysely,
    private readonly outbox: TransactionalOutbox,
  ) {
    this.db = db as Kysely<Tables>;
  }

  create(request: ExecutionRequestedPayload, events: EventsFor<Execution>): Promise<Execution> {
    return this.inTransaction(events, async (trx) => {
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
      return toExecution(row);
    });
  }

  async get(id: string): Promise<Execution | undefined> {
    const row = await this.db.selectFrom('executions').selectAll().where('id', '=', id).executeTakeFirst();
    return row && toExecution(row);
  }

  async listByUser(userId: number, options: { limit: number; before?: string }): Promise<Execution[]> {
    let query = this.db
      .selectFrom('executions')
      .selectAll()
      .where('user_id', '=', userId)
      .orderBy('id', 'desc')
      .limit(options.limit);
    if (options.before !== undefined) query = query.where('id', '<', options.before);
    return (await query.execute()).map(toExecution);
  }

  async markRunning(id: string, events: EventsFor<Execution>): Promise<boolean> {
    const updated = await this.inTransaction(events, async (trx) => {
      const row = await trx
        .updateTable('executions')
        .set({ status: 'running', started_at: now() })
        .where('id', '=', id)
        .where('status', '=', 'queued')
        .returningAll()
        .executeTakeFirst();
      return row && toExecution(row);
    });
    return updated !== undefined;
  }

  async finish(id: string, outcome: ExecutionOutcome, events: EventsFor<Execution>): Promise<boolean> {
    const updated = await this.inTransaction(events, async (trx) => {
      const row = await trx
        .updateTable('executions')
        .set({
          status: outcome.status,
          output: outcome.output,
          result: outcome.result === undefined ? null : JSON.stringify(outcome.result),
          error: outcome.error,
          duration_ms: outcome.duration_ms,
          finished_at: now(),
        })
        .where('id', '=', id)
        .where('status', 'in', ['queued', 'running'])
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
