import { context, type Span, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import {
  ATTR_DB_COLLECTION_NAME,
  ATTR_DB_OPERATION_NAME,
  ATTR_DB_QUERY_SUMMARY,
  ATTR_DB_QUERY_TEXT,
  ATTR_DB_SYSTEM_NAME,
  ATTR_ERROR_TYPE,
  DB_SYSTEM_NAME_VALUE_POSTGRESQL,
} from '@opentelemetry/semantic-conventions';
import {
  ATTR_DB_RESPONSE_RETURNED_ROWS,
  DB_SYSTEM_NAME_VALUE_SQLITE,
} from '@opentelemetry/semantic-conventions/incubating';
import type {
  KyselyPlugin,
  LogEvent,
  OperationNode,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryId,
  QueryResult,
  RootOperationNode,
  UnknownRow,
} from 'kysely';

const OPERATIONS: Partial<Record<RootOperationNode['kind'], string>> = {
  SelectQueryNode: 'SELECT',
  InsertQueryNode: 'INSERT',
  UpdateQueryNode: 'UPDATE',
  DeleteQueryNode: 'DELETE',
  MergeQueryNode: 'MERGE',
  CreateTableNode: 'CREATE TABLE',
  CreateIndexNode: 'CREATE INDEX',
  CreateSchemaNode: 'CREATE SCHEMA',
  CreateViewNode: 'CREATE VIEW',
  CreateTypeNode: 'CREATE TYPE',
  DropTableNode: 'DROP TABLE',
  DropIndexNode: 'DROP INDEX',
  DropSchemaNode: 'DROP SCHEMA',
  DropViewNode: 'DROP VIEW',
  DropTypeNode: 'DROP TYPE',
  AlterTableNode: 'ALTER TABLE',
  RefreshMaterializedViewNode: 'REFRESH MATERIALIZED VIEW',
};

export interface KyselyTracingOptions {
  readonly dialect: 'sqlite' | 'postgres';
  /** Trace statements run outside any span (background flushes, migrations) too. Default false. */
  readonly traceRootStatements?: boolean;
  readonly tracer?: Tracer;
}

/**
 * One client span per SQL statement, child of the active span, for every dialect: the plugin
 * opens it when Kysely hands over the query and closes it with the result. Pass `log` as Kysely's
 * `log` option too: it adds the statement text (parameterised, never the values) and records
 * failures, which never reach `transformResult`.
 *
 * @example
 *   const tracing = new KyselyTracingPlugin({ dialect: 'sqlite' });
 *   new Kysely({ dialect, plugins: [tracing], log: tracing.log });
 */
export class KyselyTracingPlugin implements KyselyPlugin {
  private readonly spans = new WeakMap<QueryId, Span>();
  private readonly tracer: Tracer;
  private readonly system: string;
  private readonly traceRootStatements: boolean;

  constructor(options: KyselyTracingOptions) {
    this.tracer = options.tracer ?? trace.getTracer('urlshortener.database');
    this.system = options.dialect === 'postgres' ? DB_SYSTEM_NAME_VALUE_POSTGRESQL : DB_SYSTEM_NAME_VALUE_SQLITE;
    this.traceRootStatements = options.traceRootStatements ?? false;
  }

  transformQuery({ node, queryId }: PluginTransformQueryArgs): RootOperationNode {
    const active = context.active();
    const parent = trace.getSpan(active);
    if (parent === undefined ? !this.traceRootStatements : !parent.isRecording()) return node;
    const operation = OPERATIONS[node.kind];
    const collection = collectionOf(node);
    // The span is named by `db.query.summary` (database conventions): operation and table.
    const summary =
      operation === undefined ? undefined : collection === undefined ? operation : `${operation} ${collection}`;
    const span = this.tracer.startSpan(
      summary ?? 'sql',
      {
        kind: SpanKind.CLIENT,
        attributes: {
          [ATTR_DB_SYSTEM_NAME]: this.system,
          ...(operation === undefined ? {} : { [ATTR_DB_OPERATION_NAME]: operation }),
          ...(collection === undefined ? {} : { [ATTR_DB_COLLECTION_NAME]: collection }),
          ...(summary === undefined ? {} : { [ATTR_DB_QUERY_SUMMARY]: summary }),
        },
      },
      active,
    );
    this.spans.set(queryId, span);
    return node;
  }

  async transformResult({ result, queryId }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    const span = this.spans.get(queryId);
    if (span !== undefined) {
      this.spans.delete(queryId);
      span.setAttribute(ATTR_DB_RESPONSE_RETURNED_ROWS, result.rows.length);
      span.end();
    }
    return result;
  }

  /** Kysely's `log` option: the statement text, and the end of a statement that failed. */
  readonly log = (event: LogEvent): void => {
    const span = this.spans.get(event.query.queryId);
    if (span === undefined) return;
    const text = event.query.sql;
    span.setAttribute(ATTR_DB_QUERY_TEXT, text);
    if (event.query.query.kind === 'RawNode') {
      // A raw statement: its operation is the first keyword of its text.
      const operation = /^\s*([a-z]+)/i.exec(text)?.[1]?.toUpperCase();
      if (operation !== undefined) {
        span
          .setAttributes({ [ATTR_DB_OPERATION_NAME]: operation, [ATTR_DB_QUERY_SUMMARY]: operation })
          .updateName(operation);
      }
    }
    if (event.level === 'error') {
      this.spans.delete(event.query.queryId);
      const error = event.error;
      span.setAttribute(ATTR_ERROR_TYPE, errorType(error));
      if (error instanceof Error) span.recordException(error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      span.end();
    } else if (event.isStream) {
      this.spans.delete(event.query.queryId);
      span.end();
    }
  };
}

/** The table a simple statement works on, when it names exactly one at its root. */
function collectionOf(node: RootOperationNode): string | undefined {
  switch (node.kind) {
    case 'SelectQueryNode':
    case 'DeleteQueryNode':
      return node.from?.froms.length === 1 ? tableName(node.from.froms[0]) : undefined;
    case 'InsertQueryNode':
      return tableName(node.into);
    case 'UpdateQueryNode':
      return tableName(node.table);
    case 'CreateTableNode':
    case 'DropTableNode':
    case 'AlterTableNode':
      return tableName(node.table);
    default:
      return undefined;
  }
}

function tableName(node: OperationNode | undefined): string | undefined {
  if (node === undefined) return undefined;
  if (node.kind === 'AliasNode') return tableName((node as unknown as { node: OperationNode }).node);
  if (node.kind !== 'TableNode') return undefined;
  return (node as unknown as { table: { identifier: { name: string } } }).table.identifier.name;
}

/** `error.type`: the driver's error code (`23505`, `SQLITE_CONSTRAINT_UNIQUE`) or the class name. */
function errorType(error: unknown): string {
  if (typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string')
    return error.code;
  return error instanceof Error ? error.name : '_OTHER';
}
