import type { Migration } from 'kysely';
import type { Dialect } from '../database.js';
import { urlMappings } from './0001-url-mappings.js';
import { users } from './0002-users.js';
import { settings } from './0003-settings.js';
import { eventLog } from './0010-event-log.js';
import { eventStoreAndDeadLetters } from './0011-event-store-and-dead-letters.js';
import { executions } from './0020-executions.js';
import { notifications } from './0030-notifications.js';
import { urlClickDeltas } from './0040-url-click-deltas.js';
import { durableAuthState } from './0051-durable-auth-state.js';
import { authFailureVersions } from './0053-auth-failure-versions.js';
import { executionAttempts } from './0052-execution-attempts.js';
import { urlMappingOwners } from './0060-url-mapping-owners.js';
import { urlMappingSearch } from './0061-url-mapping-search.js';
import { urlMappingCreatedOrder } from './0062-url-mapping-created-order.js';
import { visitJournal } from './0077-visit-journal.js';
import { visitJournalData } from './0078-visit-journal-data.js';
import { deadLetterRetryAt } from './0079-dead-letter-retry-at.js';
import { clickWriters } from './0080-click-writers.js';
import { userDisabled } from './0065-user-disabled.js';
import { apiKeys } from './0066-api-keys.js';
import { userSessionsNotBefore } from './0067-user-sessions-not-before.js';
import { settingsVersion } from './0068-settings-version.js';
import { visits } from './0070-visits.js';
import { visitRollups } from './0071-visit-rollups.js';
import { visitorHashes } from './0072-visitor-hashes.js';
import { urlMappingLifecycle } from './0073-url-mapping-lifecycle.js';
import { visitSegments } from './0075-visit-segments.js';
import { visitLinkSegments } from './0076-visit-link-segments.js';
import { urlMappingExpiryIndex } from './0074-url-mapping-expiry-index.js';
import { dialectColumns } from './columns.js';
import type { SchemaMigration } from './migration.js';

/** Every migration, one file each, in name order (the order Kysely runs them in). */
const MIGRATIONS: readonly SchemaMigration[] = [
  urlMappings,
  users,
  settings,
  eventLog,
  eventStoreAndDeadLetters,
  executions,
  notifications,
  urlClickDeltas,
  durableAuthState,
  executionAttempts,
  authFailureVersions,
  urlMappingOwners,
  urlMappingSearch,
  userDisabled,
  apiKeys,
  userSessionsNotBefore,
  settingsVersion,
  visits,
  visitRollups,
  visitorHashes,
  urlMappingLifecycle,
  urlMappingExpiryIndex,
  visitSegments,
  visitLinkSegments,
  urlMappingCreatedOrder,
  visitJournal,
  visitJournalData,
  deadLetterRetryAt,
  clickWriters,
];

/** The migrations as Kysely's migrator takes them, by name, for one dialect. */
export function migrationsFor(dialect: Dialect): Record<string, Migration> {
  const columns = dialectColumns(dialect);
  const byName: Record<string, Migration> = {};
  for (const migration of MIGRATIONS) {
    if (byName[migration.name]) throw new Error(`two migrations are named ${migration.name}`);
    const { down } = migration;
    byName[migration.name] = { up: (db) => migration.up(db, columns), ...(down ? { down } : {}) };
  }
  return byName;
}
