import { required } from './columns.js';
import type { SchemaMigration } from './migration.js';

/** Users' notification channels, and what makes the fan-out and each delivery idempotent. */
export const notifications: SchemaMigration = {
  name: '0030_notifications',
  async up(db, { bigint, timestamps }) {
    await db.schema
      .createTable('notification_channels')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .$call(required(bigint, 'user_id'))
      .$call(required('text', 'type', 'name', 'url'))
      .addColumn('secret', 'text')
      .$call(timestamps('created_at'))
      .execute();
    await db.schema.createIndex('notification_channels_user').on('notification_channels').column('user_id').execute();
    await db.schema
      .createTable('notification_causes')
      .addColumn('event_id', 'text', (c) => c.primaryKey())
      .$call(timestamps('created_at'))
      .execute();
    await db.schema
      .createTable('notification_deliveries')
      .addColumn('notification_id', 'text', (c) => c.primaryKey())
      .$call(required('text', 'channel_id'))
      .$call(timestamps('delivered_at'))
      .execute();
  },
};
