import type { Kysely, Selectable } from 'kysely';
import type { EventsFor } from '../../domain/events.js';
import type { NotificationChannel } from '../../domain/notification.js';
import { canonicalTimestamp } from '../../domain/timestamp.js';
import type { NotificationRepository } from '../../ports/notification-repository.js';
import type { TransactionalOutbox } from '../event-bus/outbox.js';
import { type Dialect, isUniqueViolation } from './database.js';
import { insertWithinLimit } from './per-user-limit.js';
import type { DatabaseSchema, NotificationChannelsTable } from './schema.js';

const now = () => canonicalTimestamp(new Date().toISOString())!;

/** Serialises one user's channel creations on PostgreSQL (with the user id as the lock's second key). */
const CHANNELS_LOCK_CLASS = 0x4348414e; // "CHAN"

function toChannel(row: Selectable<NotificationChannelsTable>): NotificationChannel {
  return { ...row, user_id: Number(row.user_id) };
}

export class KyselyNotificationRepository implements NotificationRepository {
  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly dialect: Dialect,
    private readonly outbox: TransactionalOutbox,
  ) {}

  async createChannel(
    channel: Omit<NotificationChannel, 'created_at'>,
    maxPerUser: number,
  ): Promise<NotificationChannel | undefined> {
    // One creation of a user at a time, across instances.
    return insertWithinLimit(
      (change) => this.db.transaction().execute(change),
      { dialect: this.dialect, lockClass: CHANNELS_LOCK_CLASS, userId: channel.user_id, max: maxPerUser },
      async (trx) =>
        toChannel(
          await trx
            .insertInto('notification_channels')
            .values({ ...channel, created_at: now() })
            .returningAll()
            .executeTakeFirstOrThrow(),
        ),
      async (trx) => {
        const { channels } = await trx
          .selectFrom('notification_channels')
          .select((eb) => eb.fn.countAll<number>().as('channels'))
          .where('user_id', '=', channel.user_id)
          .executeTakeFirstOrThrow();
        return Number(channels);
      },
    );
  }

  async listChannels(userId: number): Promise<NotificationChannel[]> {
    const rows = await this.db
      .selectFrom('notification_channels')
      .selectAll()
      .where('user_id', '=', userId)
      // Ids are UUIDv7, so id order is creation order. Not `created_at`: on SQLite it is canonical
      // RFC 3339 text, whose trimmed fractions (`.12Z`, `.123Z`) do not sort as time.
      .orderBy('id')
      .execute();
    return rows.map(toChannel);
  }

  async getChannel(id: string): Promise<NotificationChannel | undefined> {
    const row = await this.db.selectFrom('notification_channels').selectAll().where('id', '=', id).executeTakeFirst();
    return row && toChannel(row);
  }

  async deleteChannel(userId: number, id: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('notification_channels')
      .where('id', '=', id)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    return Number(result.numDeletedRows) === 1;
  }

  async recordRequests(causeEventId: string, events: EventsFor<string>): Promise<void> {
    try {
      await this.outbox.transact(this.db, events, async (trx) => {
        await trx.insertInto('notification_causes').values({ event_id: causeEventId, created_at: now() }).execute();
        return causeEventId;
      });
    } catch (error) {
      if (!isUniqueViolation(error)) throw error; // already fanned out: a redelivered event
    }
  }

  async wasDelivered(notificationId: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('notification_deliveries')
      .select('notification_id')
      .where('notification_id', '=', notificationId)
      .executeTakeFirst();
    return row !== undefined;
  }

  async markDelivered(notificationId: string, channelId: string): Promise<void> {
    await this.db
      .insertInto('notification_deliveries')
      .values({ notification_id: notificationId, channel_id: channelId, delivered_at: now() })
      .onConflict((oc) => oc.column('notification_id').doNothing())
      .execute();
  }
}
