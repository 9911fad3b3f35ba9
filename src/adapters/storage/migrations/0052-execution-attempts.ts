import { sql } from 'kysely';
import type { SchemaMigration } from './migration.js';

/** Executions that can be claimed again after their worker is lost, and cut at their limits. */
export const executionAttempts: SchemaMigration = {
  name: '0052_execution_attempts',
  async up(db, { bigint }) {
    const columns: [string, 'integer' | 'text' | 'bigint', boolean][] = [
      ['attempt', 'integer', true],
      ['claimed_by', 'text', false],
      ['claimed_until', bigint, false],
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
};
