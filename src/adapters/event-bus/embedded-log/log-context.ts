import type { EventEmitter } from 'node:events';
import type { Kysely } from 'kysely';
import type { DatabaseSchema } from '../../storage/schema.js';
import type { TransactionRunner } from '../outbox.js';
import type { PartitionEnds } from './partition-ends.js';
import type { LogStatements } from './log-statements.js';
import type { RecentEntries } from './recent-entries.js';

export interface EmbeddedLogOptions {
  readonly partitions: number;
  /** How long a member holds a partition without renewing; a crashed member's work moves after this. */
  readonly leaseMs: number;
  /** How often to look for messages published by other processes (this process's wake us at once). */
  readonly pollMs: number;
  /** Delay before a message whose handler failed is delivered again. */
  readonly retryDelayMs: number;
  readonly batchSize: number;
  /** The database's dialect (SQLite by default): PostgreSQL takes a batch's partitions in one statement. */
  readonly dialect?: 'sqlite' | 'postgres';
  readonly clock?: () => number;
  /** How a group's position commit runs (SQLite: in the group commit of the service's writes); alone by default. */
  readonly transactions?: TransactionRunner;
}

/** What the bus shares with the members of its consumer groups. */
export interface LogContext {
  readonly db: Kysely<DatabaseSchema>;
  readonly statements: LogStatements;
  /** What this process committed lately, for its own consumers. */
  readonly recent: RecentEntries;
  /** Emits a topic's name when this process commits entries to it. */
  readonly wake: EventEmitter;
  /** Where each partition's committed entries end (read once a poll interval). */
  readonly ends: PartitionEnds;
  readonly options: EmbeddedLogOptions;
  readonly now: () => number;
}
