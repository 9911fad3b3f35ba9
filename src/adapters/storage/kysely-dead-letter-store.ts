import type { ExpressionBuilder, Kysely, Selectable } from 'kysely';
import type { DeadLetter, DeadLetterStatus } from '../../domain/dead-letter.js';
import type { EventEnvelope, MessageHeaders } from '../../domain/events.js';
import type { ClaimedRetry, DeadLetterStore, NewDeadLetter } from '../../ports/dead-letter-store.js';
import type { DatabaseSchema, EventTables } from './schema.js';

type Row = EventTables['dead_letters'];

/** A `retrying` letter whose re-publication is due at `now` (one with no time recorded is due at once). */
const dueAt = (now: number) => (eb: ExpressionBuilder<DatabaseSchema, 'dead_letters'>) =>
  eb.and([eb('status', '=', 'retrying'), eb.or([eb('retry_at', 'is', null), eb('retry_at', '<=', now)])]);

/** `dead_letters` in the service's database (SQLite or PostgreSQL). */
export class KyselyDeadLetterStore implements DeadLetterStore {
  private readonly db: Kysely<DatabaseSchema>;

  constructor(db: Kysely<DatabaseSchema>) {
    this.db = db;
  }

  async list(options: { status?: DeadLetterStatus; limit: number; after?: number }): Promise<DeadLetter[]> {
    let query = this.db.selectFrom('dead_letters').selectAll().orderBy('id').limit(options.limit);
    if (options.status) query = query.where('status', '=', options.status);
    if (options.after !== undefined) query = query.where('id', '>', options.after);
    return (await query.execute()).map(toDeadLetter);
  }

  async get(id: number): Promise<DeadLetter | undefined> {
    const row = await this.db.selectFrom('dead_letters').selectAll().where('id', '=', id).executeTakeFirst();
    return row && toDeadLetter(row);
  }

  async findByMessage(dlqEventId: string): Promise<{ id: number; status: DeadLetterStatus } | undefined> {
    const row = await this.db
      .selectFrom('dead_letters')
      .select(['id', 'status'])
      .where('dlq_event_id', '=', dlqEventId)
      .executeTakeFirst();
    return row && { id: Number(row.id), status: row.status };
  }

  async countOthers(eventId: string, group: string, dlqEventId: string): Promise<number> {
    const { n } = await this.db
      .selectFrom('dead_letters')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('event_id', '=', eventId)
      .where('group_name', '=', group)
      .where('dlq_event_id', '!=', dlqEventId)
      .executeTakeFirstOrThrow();
    return Number(n);
  }

  async record(letter: NewDeadLetter, now: number): Promise<number> {
    const row = await this.db
      .insertInto('dead_letters')
      .values({
        dlq_event_id: letter.dlq_event_id,
        event_id: letter.envelope.event_id,
        event_type: letter.envelope.event_type,
        topic: letter.topic,
        partition_no: letter.partition,
        group_name: letter.group,
        headers: JSON.stringify(letter.headers),
        envelope: JSON.stringify(letter.envelope),
        error: letter.error,
        attempts: letter.attempts,
        status: letter.status,
        created_at: now,
        updated_at: now,
        retry_at: letter.retry_at ?? null,
        retry_context: letter.retry_context ? JSON.stringify(letter.retry_context) : null,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return Number(row.id);
  }

  async setStatus(id: number, status: DeadLetterStatus, now: number): Promise<void> {
    await this.db.updateTable('dead_letters').set({ status, updated_at: now }).where('id', '=', id).execute();
  }

  async changeStatus(id: number, from: DeadLetterStatus, to: DeadLetterStatus, now: number): Promise<boolean> {
    const result = await this.db
      .updateTable('dead_letters')
      .set({ status: to, updated_at: now })
      .where('id', '=', id)
      .where('status', '=', from)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async due(now: number, limit: number): Promise<number[]> {
    const rows = await this.db
      .selectFrom('dead_letters')
      .select('id')
      .where(dueAt(now))
      .orderBy('retry_at')
      .orderBy('id')
      .limit(limit)
      .execute();
    return rows.map((row) => Number(row.id));
  }

  async claimRetry(id: number, now: number, until: number): Promise<ClaimedRetry | undefined> {
    const row = await this.db
      .updateTable('dead_letters')
      .set({ retry_at: until })
      .where('id', '=', id)
      .where(dueAt(now))
      .returningAll()
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      letter: toDeadLetter(row),
      context: row.retry_context === null ? undefined : (JSON.parse(row.retry_context) as MessageHeaders),
    };
  }

  async reschedule(id: number, at: number): Promise<void> {
    await this.db
      .updateTable('dead_letters')
      .set({ retry_at: at })
      .where('id', '=', id)
      .where('status', '=', 'retrying')
      .execute();
  }
}

function toDeadLetter(row: Selectable<Row>): DeadLetter {
  return {
    id: Number(row.id),
    event_id: row.event_id,
    event_type: row.event_type,
    topic: row.topic,
    partition: row.partition_no,
    group: row.group_name,
    status: row.status,
    attempts: row.attempts,
    error: row.error,
    headers: JSON.parse(row.headers) as MessageHeaders,
    envelope: JSON.parse(row.envelope) as EventEnvelope,
    created_at: new Date(Number(row.created_at)).toISOString(),
    updated_at: new Date(Number(row.updated_at)).toISOString(),
    retry_at: row.status === 'retrying' && row.retry_at !== null ? new Date(Number(row.retry_at)).toISOString() : null,
  };
}
