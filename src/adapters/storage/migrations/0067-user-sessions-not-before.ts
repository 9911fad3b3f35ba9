import type { SchemaMigration } from './migration.js';

/** Session tokens issued before this instant are refused: set when an account is disabled. */
export const userSessionsNotBefore: SchemaMigration = {
  name: '0067_user_sessions_not_before',
  async up(db, { timestamp }) {
    await db.schema.alterTable('users').addColumn('sessions_not_before', timestamp).execute();
  },
};
