import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import {
  ATTR_DB_COLLECTION_NAME,
  ATTR_DB_OPERATION_NAME,
  ATTR_DB_QUERY_SUMMARY,
  ATTR_DB_QUERY_TEXT,
  ATTR_DB_SYSTEM_NAME,
  ATTR_ERROR_TYPE,
} from '@opentelemetry/semantic-conventions';
import {
  ATTR_DB_RESPONSE_RETURNED_ROWS,
  DB_SYSTEM_NAME_VALUE_SQLITE,
} from '@opentelemetry/semantic-conventions/incubating';

/** A statement run outside Kysely, described as KyselyTracingPlugin describes the ones it sees. */
export interface Statement {
  readonly operation: string;
  readonly collection: string;
  /** The statement's text, with placeholders (never the values). */
  readonly text: string;
}

/**
 * Runs a synchronous SQLite statement (one `better-sqlite3` call that Kysely never sees) under a
 * client span of its own, a child of the active span, with the attributes the Kysely tracing
 * plugin gives every other statement, so traces show it the same way. Call it only when the
 * active span is recording: otherwise run the statement without it.
 */
export function inSqliteStatementSpan<T>(statement: Statement, run: () => T, rows: (result: T) => number): T {
  const span = trace.getTracer('urlshortener.database').startSpan(
    `${statement.operation} ${statement.collection}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        [ATTR_DB_SYSTEM_NAME]: DB_SYSTEM_NAME_VALUE_SQLITE,
        [ATTR_DB_OPERATION_NAME]: statement.operation,
        [ATTR_DB_COLLECTION_NAME]: statement.collection,
        [ATTR_DB_QUERY_SUMMARY]: `${statement.operation} ${statement.collection}`,
        [ATTR_DB_QUERY_TEXT]: statement.text,
      },
    },
    context.active(),
  );
  try {
    const result = run();
    span.setAttribute(ATTR_DB_RESPONSE_RETURNED_ROWS, rows(result));
    return result;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    span.setAttribute(
      ATTR_ERROR_TYPE,
      typeof code === 'string' ? code : error instanceof Error ? error.name : '_OTHER',
    );
    if (error instanceof Error) span.recordException(error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
    throw error;
  } finally {
    span.end();
  }
}
