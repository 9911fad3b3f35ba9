import type { Generated } from 'kysely';
import type { ExecutionStatus } from '../../domain/execution.js';
import type { ChannelType } from '../../domain/notification.js';

/**
 * Every table of the service's database as Kysely sees it: the one schema each adapter queries.
 * The migrations in ./migrations/ make these tables; a change here goes with a migration there.
 *
 * Timestamps named `*_at` cross this boundary as canonical RFC 3339 strings (timestamptz on
 * PostgreSQL, text on SQLite), except where a comment says Unix milliseconds (bigint/integer).
 */

// URL mappings

export interface UrlMappingsTable {
  id: Generated<number>;
  code: string;
  url: string;
  created_at: string;
  click_count: number;
  /** The creating user's id; null when created anonymously. */
  owner_id: number | null;
  /** When the link stops answering (migration 0073); null: never. */
  expires_at: string | null;
  /** Redirects the link answers at most; null: no limit. */
  max_visits: number | null;
  /** Redirects reserved against `max_visits` (its clicks so far when the limit was set). */
  visits_used: Generated<number>;
  /** When this link's `url.expired` was published (the claim that makes it once); null: not yet. */
  expired_event_at: string | null;
}

/**
 * Clicks written but not yet folded into `url_mappings.click_count`: one narrow row per mapping.
 * A mapping's count is its `click_count` plus the `delta` of the row with its id as `url_id`.
 */
export interface UrlClickDeltasTable {
  url_id: number;
  delta: number;
}

/** The last click chunk each click buffer wrote (migration 0080): a chunk written again is added once. */
export interface ClickWritersTable {
  writer: string;
  last_seq: number;
  written_at: number;
}

// Visits and their rollups (issue 15)

/** One counted redirect, as derived from its request: never the address or the full User-Agent. */
/** One mapping's visits of one UTC day from one flush batch (src/domain/visit-segment.ts). */
export interface VisitSegmentsTable {
  id: Generated<number>;
  url_id: number;
  /** Unix days. */
  day: number;
  /** Unix milliseconds of the first and the last visit. */
  first_ms: number;
  last_ms: number;
  visits: number;
  data: string;
}

/** The segments added to their day rows, by link and end (what a page of a link's visits looks for). */
export interface VisitLinkSegmentsTable {
  url_id: number;
  last_ms: number;
  segment_id: number;
}

/** Segments not yet added to their day rows. */
export interface VisitUnfoldedTable {
  segment_id: number;
  url_id: number;
}

/** A flush's visits, prepared, until merged into segments (src/domain/visit-journal.ts). */
export interface VisitJournalTable {
  id: Generated<number>;
  written_at_ms: number;
  /** The link the row is merged through (0: none yet). */
  merged_through: number;
  visits: number;
}

/** A journal row's text (migration 0078): deleted with its row. */
export interface VisitJournalDataTable {
  id: number;
  /**
   * A row's bytes (src/domain/visit-journal.ts): SQLite keeps them as a BLOB in this text column,
   * PostgreSQL as base64 text; a row of the first format, its JSON text.
   */
  data: string | Uint8Array;
}

/** Batches written by a visit flush (for a day): a retried batch whose first commit went through is skipped. */
export interface VisitBatchesTable {
  id: string;
  written_at_ms: number;
}

/** One mapping's statistics of one UTC day (`day`: Unix days): `data` is src/domain/visit-day.ts's text. */
export interface VisitDaysTable {
  url_id: number;
  day: number;
  data: string;
}

/** The day's salt of the visitor hashes; deleted once the day is over. */
export interface VisitSaltsTable {
  day: number;
  salt: string;
}

// Accounts and settings

export interface UsersTable {
  id: Generated<number>;
  username: string;
  /** Lower-case. */
  email: string;
  role: 'user' | 'admin';
  password_hash: string;
  created_at: string;
  updated_at: string;
  /** When an administrator disabled the account; null while it is enabled. */
  disabled_at: string | null;
  /** Session tokens issued before this are refused (set when the account is disabled). */
  sessions_not_before: string | null;
}

/** API keys: only the SHA-256 of the key is stored. */
export interface ApiKeysTable {
  id: Generated<number>;
  user_id: number;
  name: string;
  /** The first characters of the key, to recognise it in a list. */
  prefix: string;
  /** Hex SHA-256 of the whole key. */
  key_hash: string;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
}

/** Runtime settings changed by administrators; absent keys follow their configured defaults. */
export interface SettingsTable {
  key: string;
  /** JSON text. */
  value: string;
  updated_at: string;
}

/** One row: raised with every change to `settings`, the change signal of instances without Redis. */
export interface SettingsVersionTable {
  version: number;
}

/** One row per revoked thing, by kind (`token`, later API keys and users) and id. Expiry: epoch ms. */
export interface AuthRevocationsTable {
  kind: string;
  id: string;
  expires_at_ms: number;
}

/** Failed logins per subject in the open window; the window ends at `expires_at_ms` (epoch ms). */
export interface AuthLoginFailuresTable {
  subject: string;
  /** 0 once cleared: the record stays until its window ends, its version ordering late copies. */
  failures: number;
  expires_at_ms: number;
  version: number;
}

// Events: the transactional outbox and the embedded bus's log. Times are Unix milliseconds.

/** Events waiting to be handed to the bus; written in the same transaction as the change. */
export interface EventOutboxTable {
  id: Generated<number>;
  topic: string;
  message_key: string;
  event_id: string;
  headers: string;
  envelope: string;
  created_at: number;
}

/** The embedded bus: an append-only log split into partitions. */
export interface EventLogTable {
  topic: string;
  partition_no: number;
  log_offset: number;
  /** The envelope's event id, or the id a deliberate re-publication was given. */
  message_id: string;
  headers: string;
  envelope: string;
  created_at: number;
}

/** The next offset to assign, per partition (the row lock orders concurrent publishers). */
export interface EventPartitionsTable {
  topic: string;
  partition_no: number;
  next_offset: number;
}

/** Per consumer group and partition: the next offset to deliver. */
export interface ConsumerOffsetsTable {
  group_name: string;
  topic: string;
  partition_no: number;
  next_offset: number;
}

/** Which member of a group holds a partition, until when. Also used for the outbox relay. */
export interface ConsumerLeasesTable {
  group_name: string;
  topic: string;
  partition_no: number;
  owner: string;
  expires_at: number;
}

/** Live members of a group, refreshed by heartbeat; the partitions are shared among them. */
export interface ConsumerMembersTable {
  group_name: string;
  topic: string;
  member: string;
  expires_at: number;
}

/** Every event, persisted by the event store consumer; one row per event id. */
export interface EventStoreTable {
  event_id: string;
  event_type: string;
  event_version: number;
  topic: string;
  partition_no: number;
  log_offset: number;
  execution_id: string | null;
  service: string;
  /** RFC 3339, as the envelope carries it. */
  occurred_at: string;
  payload: string;
  headers: string;
  stored_at: number;
}

/** Dead-lettered messages, as the dead-letter manager received them. */
export interface DeadLettersTable {
  id: Generated<number>;
  dlq_event_id: string;
  event_id: string;
  event_type: string;
  topic: string;
  partition_no: number;
  group_name: string;
  headers: string;
  envelope: string;
  error: string;
  attempts: number;
  status: 'retrying' | 'retried' | 'parked' | 'discarded';
  created_at: number;
  updated_at: number;
  /** When a `retrying` letter's automatic re-publication is due (migration 0079; null before it). */
  retry_at: number | null;
  /** The trace context (headers) of the `dlq.consume` span that decided the retry, as JSON. */
  retry_context: string | null;
}

// Executions and notifications

export interface ExecutionsTable {
  id: string;
  user_id: number;
  language: string;
  script: string;
  timeout_ms: number;
  status: ExecutionStatus;
  output: string;
  result: string | null;
  error: string | null;
  duration_ms: number | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** From 0052: runs started so far; the claim of the latest and until when it holds (ms). */
  attempt: Generated<number>;
  claimed_by: string | null;
  claimed_until: number | null;
  /** 1 when output, result or error was cut at its limit. */
  truncated: Generated<number>;
}

export interface NotificationChannelsTable {
  id: string;
  user_id: number;
  type: ChannelType;
  name: string;
  url: string;
  secret: string | null;
  created_at: string;
}

/** One row per event whose notifications were requested: makes the fan-out idempotent. */
export interface NotificationCausesTable {
  event_id: string;
  created_at: string;
}

export interface NotificationDeliveriesTable {
  notification_id: string;
  channel_id: string;
  delivered_at: string;
}

export interface DatabaseSchema {
  url_mappings: UrlMappingsTable;
  url_click_deltas: UrlClickDeltasTable;
  click_writers: ClickWritersTable;
  users: UsersTable;
  api_keys: ApiKeysTable;
  visit_segments: VisitSegmentsTable;
  visit_unfolded: VisitUnfoldedTable;
  visit_link_segments: VisitLinkSegmentsTable;
  visit_batches: VisitBatchesTable;
  visit_journal: VisitJournalTable;
  visit_journal_data: VisitJournalDataTable;
  visit_days: VisitDaysTable;
  visit_salts: VisitSaltsTable;
  settings: SettingsTable;
  settings_version: SettingsVersionTable;
  auth_revocations: AuthRevocationsTable;
  auth_login_failures: AuthLoginFailuresTable;
  event_outbox: EventOutboxTable;
  event_log: EventLogTable;
  event_partitions: EventPartitionsTable;
  consumer_offsets: ConsumerOffsetsTable;
  consumer_leases: ConsumerLeasesTable;
  consumer_members: ConsumerMembersTable;
  event_store: EventStoreTable;
  dead_letters: DeadLettersTable;
  executions: ExecutionsTable;
  notification_channels: NotificationChannelsTable;
  notification_causes: NotificationCausesTable;
  notification_deliveries: NotificationDeliveriesTable;
}

/** The event tables alone: what a test or tool that reads the event log and outbox names. */
export type EventTables = Pick<
  DatabaseSchema,
  | 'event_outbox'
  | 'event_log'
  | 'event_partitions'
  | 'consumer_offsets'
  | 'consumer_leases'
  | 'consumer_members'
  | 'event_store'
  | 'dead_letters'
>;
