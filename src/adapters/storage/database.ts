import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import SQLite from 'better-sqlite3';
import {
  type ColumnMetadata,
  CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type DatabaseMetadataOptions,
  DEFAULT_MIGRATION_LOCK_TABLE,
  DEFAULT_MIGRATION_TABLE,
  type Driver,
  Kysely,
  type KyselyConfig,
  type KyselyPlugin,
  PostgresAdapter,
  PostgresDialect,
  type PostgresDialectConfig,
  PostgresIntrospector,
  type QueryResult,
  sql,
  type TableMetadata,
  type SqliteDatabase,
  SqliteDialect,
  type SqliteDialectConfig,
  SqliteDriver,
  type TransactionSettings,
} from 'kysely';
import type pg from 'pg';
import type { DatabaseConfig } from '../../config/config.js';
import { canonicalTimestamp } from '../../domain/timestamp.js';
import type { DatabaseSchema } from './schema.js';
import { FALLBACK_AUTOCHECKPOINT_PAGES, SqliteCheckpointer } from './sqlite-checkpointer.js';
import { assertSqliteRuntime } from './sqlite-runtime.js';
import { SESSION_QUERY, type SessionKey, UnansweredStatements } from './unanswered-statements.js';

export type Dialect = DatabaseConfig['kind'];

/**
 * A Kysely handle with its table types left open: for migrations, which see each table as it was
 * when they were written. Everything else queries `Kysely<DatabaseSchema>` (schema.ts).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the one place the schema is left open
export type AnyKysely = Kysely<any>;

/** The dialect of an open handle (for code handed a Kysely alone: a migration's `down`, a test helper). */
export function dialectOf(db: AnyKysely): Dialect {
  return db.getExecutor().adapter instanceof PostgresAdapter ? 'postgres' : 'sqlite';
}

/** An open relational database: the Kysely handle plus what differs between dialects. */
export interface Database {
  readonly db: Kysely<DatabaseSchema>;
  readonly dialect: Dialect;
  /**
   * SQLite file: a connection to read committed rows from at once, for lookups that must not wait
   * behind Kysely's queue nor see a transaction the serving connection has open. While that
   * connection has none open it is the serving connection itself: SQLite keeps a connection's
   * page cache across its own commits, but a connection that sees another's commit drops its
   * whole cache (and its memory map) at its next read, and the service commits hundreds of
   * times a second under load (clicks, visits), so a connection of its own read every page
   * again from the file (bench/PROFILE.md). While a transaction is open (it spans awaits) it is
   * a read-only connection of its own, opened at the first such call and closed with the
   * database. The serving connection never has a statement iterating across awaits (nothing
   * here streams a query), so a lookup on it always runs. Absent for PostgreSQL and `:memory:`.
   */
  readonly reader?: () => SQLite.Database;
  /** Resolves when the database answers `SELECT 1` (readiness). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Why a pooled PostgreSQL connection was lost (see `OpenDatabaseOptions.onConnectionLost`). */
export type ConnectionLoss = 'broken' | 'unanswered';

/** What every statement passes through: plugins (tracing) and Kysely's log hook. */
export interface OpenDatabaseOptions {
  readonly plugins?: readonly KyselyPlugin[];
  readonly log?: KyselyConfig['log'];
  /** SQLite file: checkpoint the WAL from a thread of its own this often (see SqliteCheckpointer). */
  readonly checkpointIntervalMs?: number;
  /**
   * PostgreSQL: called when a pooled connection breaks (the server restarted, failed over, or
   * ended it: `broken`), or when a statement on it went unanswered and the service closed it
   * (`unanswered`, with why: UnansweredStatements). The pool drops that connection and opens a new
   * one when next needed.
   */
  readonly onConnectionLost?: (error: Error, cause: ConnectionLoss) => void;
}

export function openDatabase(config: DatabaseConfig, options: OpenDatabaseOptions = {}): Database {
  return config.kind === 'sqlite' ? openSqlite(config.url, options) : openPostgres(config, options);
}

function kyselyOptions(options: OpenDatabaseOptions): Pick<KyselyConfig, 'plugins' | 'log'> {
  return {
    ...(options.plugins && options.plugins.length > 0 ? { plugins: [...options.plugins] } : {}),
    ...(options.log ? { log: options.log } : {}),
  };
}

function withPing(db: Kysely<DatabaseSchema>, dialect: Dialect): Database {
  return {
    db,
    dialect,
    ping: async () => {
      await sql`SELECT 1`.execute(db);
    },
    close: () => db.destroy(),
  };
}

function openSqlite(file: string, options: OpenDatabaseOptions): Database {
  assertSqliteRuntime();
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
  const connection = new SQLite(file);
  // WAL + NORMAL: a committed transaction survives a crash of the process (not of the machine's power).
  connection.pragma('journal_mode = WAL');
  connection.pragma('synchronous = NORMAL');
  connection.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  connection.pragma('foreign_keys = ON');
  // A larger page cache and memory-mapped reads: a million mappings stay in memory.
  connection.pragma('cache_size = -65536');
  connection.pragma('mmap_size = 268435456');
  // WAL files grown under a burst are cut back to this when they restart.
  connection.pragma('journal_size_limit = 67108864');
  const checkpointer =
    options.checkpointIntervalMs === undefined || file === ':memory:'
      ? undefined
      : new SqliteCheckpointer(file, options.checkpointIntervalMs);
  if (checkpointer) connection.pragma(`wal_autocheckpoint = ${FALLBACK_AUTOCHECKPOINT_PAGES}`);
  const statements = withStatementCache(connection);
  const db = new Kysely<DatabaseSchema>({
    dialect: new SqliteWriterDialect(
      { database: statements },
      new WriteLock(connection, () => checkpointer?.wantsLock() === true),
      (query) => !connection.inTransaction && AUTOCOMMIT_WRITE.test(query) && !statements.prepare(query).readonly,
    ),
    ...kyselyOptions(options),
  });
  const database = withPing(db, 'sqlite');
  if (file === ':memory:') return database;
  let reader: SQLite.Database | undefined;
  return {
    ...database,
    reader: () => (connection.inTransaction ? (reader ??= openReader(file)) : connection),
    close: async () => {
      reader?.close();
      await checkpointer?.stop();
      await database.close();
    },
  };
}

/** How long a statement of the serving connection waits for another connection's write lock. */
const BUSY_TIMEOUT_MS = 5_000;
/** The longest pause between two attempts at the write lock (see `WriteLock`). */
const MAX_LOCK_PAUSE_MS = 16;

/** When the next transaction to ask for the serving connection was asked for (see `writesAskedSince`). */
let nextAskedAt: number | undefined;

/**
 * Starts `work`, whose transaction waits for SQLite's write lock (see `WriteLock`) as if asked for
 * at `since` (`performance.now()`): for a group of writes that waited in a queue of their own
 * before their transaction asked for the connection (GroupCommit), the oldest one's arrival.
 * `work` must ask for the connection before it first awaits (`db.transaction().execute()` does:
 * Kysely calls the driver's `acquireConnection` at once); otherwise its transaction counts from
 * when it asks. Not AsyncLocalStorage: on Node 20 its first use costs every request of the
 * process an async_hooks hook (promise-context-manager.ts).
 */
export function writesAskedSince<T>(since: number, work: () => Promise<T>): Promise<T> {
  nextAskedAt = since;
  try {
    return work();
  } finally {
    nextAskedAt = undefined;
  }
}

/**
 * Takes the write lock for a transaction without SQLite's busy handler, which waits for a lock
 * another connection holds by sleeping on the calling thread (1, 2, 5, 10, 15, 20 ms ... until
 * `busy_timeout`): on the serving connection that is the event loop, and every request waited
 * with it. Another connection holds the write lock whenever the checkpointer thread starts the WAL
 * over (sqlite-checkpointer.ts), or another process of `--workers` writes: under the uniform mix
 * over 10,000,000 links the serving thread slept 53 ms in a row that way every ~200 ms
 * (bench/PROFILE.md). Here `BEGIN IMMEDIATE` is tried with no busy timeout, and after SQLITE_BUSY
 * tried again after a pause on a timer (1, 2, 4 ... 16 ms) until BUSY_TIMEOUT_MS have passed:
 * requests are served in the pauses. A write outside a transaction (an insert, update or delete
 * run on its own) is made one of its own, so that it waits the same way (`SqliteWriterDriver`).
 *
 * The BUSY_TIMEOUT_MS count from when the transaction asked for the connection, not from when it
 * got it, and the connection is given back during each pause: it runs one statement or
 * transaction at a time, and while the lock is another process's, every other use of it would
 * otherwise queue behind the one waiting. That way the writers queued behind a lock that another
 * process kept were refused one busy timeout after another (the 30th after 150 s, long after its
 * client gave up), and every read of the connection waited with them; now each writer is refused
 * about one busy timeout after it asked (one whose time is up when its turn comes tries once, and
 * takes the lock if it was let go meanwhile), and the reads go on.
 */
class WriteLock {
  /**
   * @param yieldTo whether the checkpointer thread wants the lock to start the WAL over: then no
   *   transaction begins (until BUSY_TIMEOUT_MS have passed), so that it gets it at once
   */
  constructor(
    private readonly connection: SQLite.Database,
    private readonly yieldTo: () => boolean,
  ) {}

  /**
   * @param since when the transaction asked for the connection (`performance.now()`)
   * @param pause waits so long with the connection given back meanwhile (it has it again after)
   */
  async begin(begin: () => Promise<unknown>, since: number, pause: (ms: number) => Promise<void>): Promise<void> {
    const deadline = since + BUSY_TIMEOUT_MS;
    for (let ms = 1; ; ms = Math.min(2 * ms, MAX_LOCK_PAUSE_MS)) {
      if (this.yieldTo() && performance.now() + ms <= deadline) {
        await pause(ms);
        continue;
      }
      // Each time anew: SQLite sets the timeout when it prepares the PRAGMA, not when it runs it.
      this.connection.pragma('busy_timeout = 0');
      try {
        await begin();
        return;
      } catch (error) {
        if (!isBusy(error) || performance.now() + ms > deadline) throw error;
      } finally {
        this.connection.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
      }
      await pause(ms);
    }
  }
}

function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/**
 * Kysely's SQLite driver, except that a transaction begins IMMEDIATE unless it says it only reads
 * (`db.transaction().setAccessMode('read only')`): it takes the database's write lock at its start,
 * waiting for it off the event loop (`WriteLock`) as long as BUSY_TIMEOUT_MS allows. A deferred
 * transaction (SQLite's default) takes it at its first write instead, waiting in SQLite's busy
 * handler on the event loop; and if it read first, and another process (`--workers`) wrote in
 * between, that write fails at once with SQLITE_BUSY_SNAPSHOT (or SQLITE_BUSY where waiting could
 * deadlock), whatever the timeout. In one process, with no other connection writing, it changes
 * nothing: its one connection runs one transaction at a time.
 */
class SqliteWriterDriver extends SqliteDriver {
  private connection: DatabaseConnection | undefined;
  /** When the connection's current holder asked for it (it goes to one caller at a time). */
  private askedAt = 0;

  /** @param autocommitWrite whether a statement is a write that would run outside any transaction */
  constructor(
    config: SqliteDialectConfig,
    private readonly lock: WriteLock,
    private readonly autocommitWrite: (sql: string) => boolean,
  ) {
    super(config);
  }

  /**
   * The one connection, with a write outside a transaction made a transaction of its own: taken
   * with `BEGIN IMMEDIATE` through `WriteLock`, then committed. Run on its own, the statement would
   * wait for the lock in SQLite's busy handler, asleep on the event loop for up to
   * BUSY_TIMEOUT_MS: while another connection held the lock, each of the embedded log's membership
   * heartbeats (an upsert of `consumer_members`) stopped the whole service for 5 s, and under load
   * no request was answered, not even refused, for minutes (test/storage/sqlite-write-lock.test.ts).
   */
  override async acquireConnection(): Promise<DatabaseConnection> {
    const askedAt = nextAskedAt ?? performance.now();
    nextAskedAt = undefined;
    const connection = await super.acquireConnection();
    this.askedAt = askedAt;
    this.connection ??= {
      executeQuery: async <R>(query: CompiledQuery): Promise<QueryResult<R>> => {
        if (!this.autocommitWrite(query.sql)) return connection.executeQuery<R>(query);
        await this.beginTransaction(connection);
        try {
          const result = await connection.executeQuery<R>(query);
          await this.commitTransaction(connection);
          return result;
        } catch (error) {
          await this.rollbackTransaction(connection);
          throw error;
        }
      },
      streamQuery: (query, chunkSize) => connection.streamQuery(query, chunkSize),
    };
    return this.connection;
  }

  override async beginTransaction(connection: DatabaseConnection, settings?: TransactionSettings): Promise<void> {
    if (settings?.accessMode === 'read only') await connection.executeQuery(CompiledQuery.raw('begin'));
    else {
      await this.lock.begin(
        () => connection.executeQuery(BEGIN_IMMEDIATE),
        this.askedAt,
        async (ms) => {
          // Not held while it waits: the reads, and the other writers' tries (each until its own
          // time is up), go on meanwhile, instead of queueing behind this one's wait.
          await super.releaseConnection();
          try {
            await sleep(ms);
          } finally {
            await super.acquireConnection();
          }
        },
      );
    }
  }
}

const BEGIN_IMMEDIATE = CompiledQuery.raw('begin immediate');

/** The statements `SqliteWriterDriver` may make a transaction of: data changes, not schema or pragmas. */
const AUTOCOMMIT_WRITE = /^\s*(insert|update|delete|replace|with)\b/i;

class SqliteWriterDialect extends SqliteDialect {
  constructor(
    private readonly writerConfig: SqliteDialectConfig,
    private readonly lock: WriteLock,
    private readonly autocommitWrite: (sql: string) => boolean,
  ) {
    super(writerConfig);
  }

  override createDriver(): SqliteDriver {
    return new SqliteWriterDriver(this.writerConfig, this.lock, this.autocommitWrite);
  }
}

/**
 * A read-only connection (see `Database.reader`), for the lookups made while the serving
 * connection has a transaction open. Its pages are read, not mapped: it sees the serving
 * connection's commits, and SQLite unmaps a connection's whole file after each one it sees (to be
 * mapped, and every page faulted in, again), which cost a lookup on 10,000,000 mappings 15–18 µs
 * with a commit every 20–100 lookups, against 8–9 read (bench/PROFILE.md).
 */
function openReader(file: string): SQLite.Database {
  const connection = new SQLite(file, { readonly: true, fileMustExist: true });
  connection.pragma('mmap_size = 0');
  connection.pragma('cache_size = -65536');
  return connection;
}

/** Prepared statements kept per SQLite connection (the hot queries repeat; IN-lists and batches vary). */
/** Enough for the batch inserts' statements (`PreparedRows`: one for each batch size up to 100, for each of a few tables) and the rest. */
const STATEMENT_CACHE_SIZE = 1024;

/** Kysely's view of a SQLite database, with better-sqlite3's statements (their `readonly` told). */
type StatementCache = Omit<SqliteDatabase, 'prepare'> & { prepare(sql: string): SQLite.Statement };

/**
 * Kysely's SQLite driver prepares every statement it runs; preparing costs more than running a
 * primary-key lookup. This keeps the most recently used prepared statements and hands them out
 * again (better-sqlite3 statements are reusable; Kysely runs one at a time per connection).
 */
function withStatementCache(connection: SQLite.Database): StatementCache {
  const statements = new Map<string, SQLite.Statement>();
  return {
    close: () => connection.close(),
    prepare: (sql: string) => {
      let statement = statements.get(sql);
      if (statement) {
        statements.delete(sql); // re-inserted below: most recently used last
      } else {
        statement = connection.prepare(sql);
        if (statements.size >= STATEMENT_CACHE_SIZE) statements.delete(statements.keys().next().value!);
      }
      statements.set(sql, statement);
      return statement;
    },
  };
}

/** DB_CONNECT_TIMEOUT_MS's default, for callers that open a database without the configuration. */
const DEFAULT_CONNECT_TIMEOUT_MS = 3000;
/** DB_IDLE_IN_TRANSACTION_TIMEOUT_MS's, likewise. */
const DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS = 30_000;
/** DB_UNANSWERED_CHECK_MS's, likewise. */
const DEFAULT_UNANSWERED_CHECK_MS = 5000;
const PG_INT8 = 20;
const PG_TIMESTAMPTZ = 1184;

/** PostgreSQL prints `2024-01-02 03:04:05.123456+00`; the service speaks RFC 3339. */
export function fromPostgresTimestamp(text: string): string {
  const withColonOffset = text.replace(/([+-]\d{2})$/, '$1:00');
  return canonicalTimestamp(withColonOffset) ?? text;
}

/**
 * The `pg` driver, loaded when a PostgreSQL database is opened (and left out of the bundle), not
 * by every process: on Node 20, loading it also loads node's `fetch` (its check for Cloudflare's
 * runtime reads the global `Response`), about 30 ms of every start, for nothing on SQLite.
 */
function loadPg(): typeof pg {
  return createRequire(import.meta.url)('pg') as typeof pg;
}

function openPostgres(config: DatabaseConfig, options: OpenDatabaseOptions): Database {
  const pg = loadPg();
  const connectTimeoutMs = config.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const pool = new pg.Pool({
    connectionString: config.url,
    max: config.poolMax,
    // Waiting for a connection (the server away, or every connection busy) fails after this.
    connectionTimeoutMillis: connectTimeoutMs,
    keepAlive: true,
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
        if (oid === PG_INT8) return (value: string) => Number(value);
        if (oid === PG_TIMESTAMPTZ) return fromPostgresTimestamp;
        return pg.types.getTypeParser(oid, format);
      }) as typeof pg.types.getTypeParser,
    },
  });
  // A connection that breaks emits 'error' (on the pool when idle, on the client when checked
  // out); unheard, that event would end the process. The pool replaces broken connections.
  const lost = (error: Error) => options.onConnectionLost?.(error, 'broken');
  pool.on('error', lost);
  // A session left inside a transaction (this process frozen, or cut off without the server
  // hearing of it) is ended by the server after this, and its locks go with it: the merge's, the
  // rows of a link being edited. The service's transactions run their statements back to back.
  const idleInTransactionMs = config.idleInTransactionTimeoutMs ?? DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT_MS;
  // A statement left unanswered (the connection cut without either side hearing of it) fails
  // after about DB_UNANSWERED_CHECK_MS and a look-up, not when the kernel gives up (UnansweredStatements).
  const checkMs = config.unansweredCheckMs ?? DEFAULT_UNANSWERED_CHECK_MS;
  const unanswered =
    checkMs > 0
      ? new UnansweredStatements({
          Client: pg.Client,
          connectionString: config.url,
          checkMs,
          connectTimeoutMs,
          onGivenUp: (error) => options.onConnectionLost?.(error, 'unanswered'),
        })
      : undefined;
  pool.on('connect', (client) => {
    client.on('error', lost);
    // Timestamps come back in UTC whatever the server's default time zone is. One query, queued
    // before anything the pool's caller sends on the connection (a second one sent while the
    // first runs has pg warn, on the process's stderr, that queueing queries is deprecated).
    const timeout =
      idleInTransactionMs > 0 ? `; SET idle_in_transaction_session_timeout = ${Math.trunc(idleInTransactionMs)}` : '';
    // Watched, it also reads its own session (SESSION_QUERY): the last of the results.
    const session = unanswered ? `; ${SESSION_QUERY}` : '';
    const setUp = (client.query(`SET TIME ZONE 'UTC'${timeout}${session}`) as Promise<unknown>).then(
      ownSession,
      () => undefined,
    );
    unanswered?.watch(client, setUp);
  });
  const db = new Kysely<DatabaseSchema>({
    dialect: new SteadyPostgresDialect({ pool }, () => unanswered?.stop()),
    ...kyselyOptions(options),
  });
  return withPing(db, 'postgres');
}

/**
 * Kysely's PostgreSQL dialect, its listing of tables confined to the schemas of the search path.
 * The migrator asks the introspector whether its own tables exist, and Kysely's listing reads
 * every schema of the database and then asks about each by name (`has_schema_privilege(name)`,
 * `pg_get_serial_sequence(name)`): a `DROP SCHEMA` elsewhere in the database meanwhile (another
 * tenant's teardown, a parallel test run's) failed it with `schema "…" does not exist`, and the
 * service did not start. Trying it again only narrowed that window: with other clients dropping
 * schemas all the time, 20 tries could all fail.
 */
class SteadyPostgresDialect extends PostgresDialect {
  /** @param closed called as the database closes (its pool ends) */
  constructor(
    config: PostgresDialectConfig,
    private readonly closed: () => void,
  ) {
    super(config);
  }

  override createIntrospector(db: AnyKysely): DatabaseIntrospector {
    return new SearchPathIntrospector(db);
  }

  override createDriver(): Driver {
    const driver = super.createDriver();
    const destroy = driver.destroy.bind(driver);
    driver.destroy = async () => {
      this.closed();
      await destroy();
    };
    return driver;
  }
}

/** The connection's own session, from the set-up query's last result (`SESSION_QUERY`). */
function ownSession(results: unknown): SessionKey | undefined {
  const last = Array.isArray(results)
    ? (results.at(-1) as { rows?: { pid?: unknown; started?: unknown }[] })
    : undefined;
  const row = last?.rows?.[0];
  return typeof row?.pid === 'number' && typeof row.started === 'string'
    ? { pid: row.pid, started: row.started }
    : undefined;
}

type ColumnRow = {
  schema: string;
  table: string;
  table_type: string;
  column: string;
  not_null: boolean;
  has_default: boolean;
  type: string;
  type_schema: string;
  column_description: string | null;
  auto_incrementing: string | null;
};

/**
 * Kysely's introspector, but `getTables` lists the tables (and views) of the search path's
 * schemas alone, in the form Kysely's does, looking schemas up by oid: nothing is asked about a
 * schema by name that another session may drop meanwhile.
 */
class SearchPathIntrospector extends PostgresIntrospector {
  constructor(private readonly db: AnyKysely) {
    super(db);
  }

  override async getTables(options?: DatabaseMetadataOptions): Promise<TableMetadata[]> {
    const internal = options?.withInternalKyselyTables
      ? sql``
      : sql`AND c.relname NOT IN (${DEFAULT_MIGRATION_TABLE}, ${DEFAULT_MIGRATION_LOCK_TABLE})`;
    const { rows } = await sql<ColumnRow>`
      SELECT ns.nspname AS schema, c.relname AS table, c.relkind AS table_type, a.attname AS column,
        a.attnotnull AS not_null, a.atthasdef AS has_default, typ.typname AS type, dtns.nspname AS type_schema,
        col_description(a.attrelid, a.attnum) AS column_description,
        pg_get_serial_sequence(quote_ident(ns.nspname) || '.' || quote_ident(c.relname), a.attname) AS auto_incrementing
      FROM pg_catalog.pg_attribute a
        JOIN pg_catalog.pg_class c ON a.attrelid = c.oid
        JOIN pg_catalog.pg_namespace ns ON c.relnamespace = ns.oid
        JOIN pg_catalog.pg_type typ ON a.atttypid = typ.oid
        JOIN pg_catalog.pg_namespace dtns ON typ.typnamespace = dtns.oid
      WHERE ns.nspname = ANY (current_schemas(false)) AND c.relkind IN ('r', 'v', 'p')
        AND has_schema_privilege(ns.oid, 'USAGE') AND a.attnum >= 0 AND NOT a.attisdropped ${internal}
      ORDER BY ns.nspname, c.relname, a.attnum`.execute(this.db);
    const tables = new Map<string, TableMetadata & { columns: ColumnMetadata[] }>();
    for (const row of rows) {
      const key = `${row.schema}.${row.table}`;
      let table = tables.get(key);
      if (!table) {
        table = { name: row.table, schema: row.schema, isView: row.table_type === 'v', columns: [] };
        tables.set(key, table);
      }
      table.columns.push({
        name: row.column,
        dataType: row.type,
        dataTypeSchema: row.type_schema,
        isNullable: !row.not_null,
        isAutoIncrementing: row.auto_incrementing !== null,
        hasDefaultValue: row.has_default,
        ...(row.column_description === null ? {} : { comment: row.column_description }),
      });
    }
    return [...tables.values()];
  }
}

/** Whether `error` is the driver's unique-constraint violation, in either dialect. */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null || !('code' in error)) return false;
  const code = (error as { code: unknown }).code;
  return code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === '23505';
}
