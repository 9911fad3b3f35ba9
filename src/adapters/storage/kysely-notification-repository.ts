import type { Kysely, Migration, Selectable } from 'kysely';
import type { EventsFor } from '../../domain/events.js';
import type { ChannelType, NotificationChannel } from '../../domain/notification.js';
import { canonicalTimestamp } from '../../domain/timestamp.js';
import type { NotificationRepository } from '../../ports/notification-repository.js';
import type { TransactionalOutbox } from '../event-bus/outbox.js';
import { type Dialect, isUniqueViolation, type AnyKysely } from './database.js';

interface Tables {
  notification_channels: {
    id: string;
    user_id: number;
    type: ChannelType;
    name: string;
    url: string;
    secret: string | null;
    created_at: string;
  };
  /** One row per event whose notifications were requested: makes the fan-out idempotent. */
  notification_causes: { event_id: string; created_at: string };
  notification_deliveries: { notification_id: string; channel_id: string; delivered_at: string };
}

export function notificationMigrations(dialect: Dialect): Record<string, Migration> {
  const time = dialect === 'postgres' ? 'timestamptz' : 'text';
  return {
    '0030_notifications': {
      async up(db: AnyKysely) {
        await db.schema
          .createTable('notification_channels')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('user_id', dialect === 'postgres' ? 'bigint' : 'integer', (c) => c.notNull())
          .addColumn('type', 'text', (c) => c.notNull())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('url', 'text', (c) => c.notNull())
          .addColumn('secret', 'text')
          .addColumn('created_at', time, (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex('notification_channels_user')
          .on('notification_channels')
          .column('user_id')
          .execute();
        await db.schema
          .createTable('notification_causes')
          .addColumn('event_id', 'text', (c) => c.primaryKey())
          .addColumn('created_at', time, (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('notification_deliveries')
          .addColumn('notification_id', 'text', (c) => c.primaryKey())
          .addColumn('channel_id', 'text', (c) => c.notNull())
          .addColumn('delivered_at', time, (c) => c.notNull())
          .execute();
      },
    },
  };
}

const now = () => canonicalTimestamp(new Date().toISOString())!;

function toChannel(row: Selectable<Tables['notification_channels']>): NotificationChannel {
  return { ...row, user_id: Number(row.user_id) };
}

export class KyselyNotificationRepository implements NotificationRepository {
  private readonly db: Kysely<Tables>;

  constructor(
    db: AnyKysely,
    private readonly outbox: TransactionalOutbox,
  ) {
    this.db = db as Kysely<Tables>;
  }

  async createChannel(channel: Omit<NotificationChannel, 'created_at'>): Promise<NotificationChannel> {
    const row = await this.db
      .insertInto('notification_channels')
      .values({ ...channel, created_at: now() })
      .returningAll()
      .executeTakeFirstOrThrow();
    return toChannel(row);
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
