import { required } from './columns.js';
import type { SchemaMigration } from './migration.js';

export const executions: SchemaMigration = {
  name: '0020_executions',
  async up(db, { bigint, timestamp, timestamps }) {
    await db.schema
      .createTable('executions')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .$call(required(bigint, 'user_id'))
      .$call(required('text', 'language', 'script'))
      .$call(required('integer', 'timeout_ms'))
      .$call(required('text', 'status'))
      .addColumn('output', 'text', (c) => c.notNull().defaultTo(''))
      .addColumn('result', 'text')
      .addColumn('error', 'text')
      .addColumn('duration_ms', 'integer')
      .$call(timestamps('created_at'))
      .addColumn('started_at', timestamp)
      .addColumn('finished_at', timestamp)
      .execute();
    await db.schema.createIndex('executions_user').on('executions').columns(['user_id', 'id']).execute();
  },
};
