import type { SchemaMigration } from './migration.js';

/** Accounts an administrator disabled: null for every existing (enabled) user. */
export const userDisabled: SchemaMigration = {
  name: '0065_user_disabled',
  async up(db, { timestamp }) {
    await db.schema.alterTable('users').addColumn('disabled_at', timestamp).execute();
  },
};
