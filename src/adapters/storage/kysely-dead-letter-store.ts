import type { Kysely, Selectable } from 'kysely';
import type { DeadLetter, DeadLetterStatus } from '../../domain/dead-letter.js';
import type { EventEnvelope, MessageHeaders } from '../../domain/events.js';
import type { DeadLetterStore, NewDeadLetter } from '../../ports/dead-letter-store.js';
import type { DatabaseSchema, EventTables } from './schema.js';

type Row = EventTables['dead_letters'];

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
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return Number(row.id);
  }

  async setStatus(id: number, status: DeadLetterStatus, now: number): Promise<void> {
    await this.db.updateTable('dead_letters').set({ status, updated_at: now }).where('id', '=', id).execute();
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
  };
}
