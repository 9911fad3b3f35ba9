import type SQLite from 'better-sqlite3';
import type { RedirectTarget } from '../../ports/url-mapping-repository.js';
import { inSqliteStatementSpan, type Statement } from '../telemetry/statement-span.js';

/** What the redirect path reads of a mapping: the target, and the limits it checks (null for most links). */
export const TARGET_COLUMNS = 'id, url, expires_at, max_visits, visits_used';

const BY_CODE: Statement = {
  operation: 'SELECT',
  collection: 'url_mappings',
  text: `SELECT ${TARGET_COLUMNS} FROM url_mappings WHERE code = ?`,
};

/** A row of a batched lookup: the target and the code it was found by. */
export interface CodedTarget extends RedirectTarget {
  readonly code: string;
}

/**
 * SQLite: the redirect path's lookup by code, answered at once by a prepared statement on the
 * connection `Database.reader` names for the moment: one that sees only committed rows, never a
 * transaction the serving connection has open. A lookup runs start to end within one turn of the
 * event loop, so no change can commit while it is under way: it cannot hand the cache a target
 * that a DELETE or PATCH already replaced.
 */
export class SqliteTargetLookup {
  /** The statement prepared on each connection the reader has named (two at most). */
  private readonly statements = new Map<SQLite.Database, SQLite.Statement<[string], RedirectTarget>>();

  constructor(private readonly connection: () => SQLite.Database) {}

  find(code: string): RedirectTarget | undefined {
    const connection = this.connection();
    let statement = this.statements.get(connection);
    if (!statement) {
      statement = connection.prepare<[string], RedirectTarget>(BY_CODE.text);
      this.statements.set(connection, statement);
    }
    return statement.get(code);
  }

  /** `find` under a statement span of its own (the request's span is recording). */
  findTraced(code: string): RedirectTarget | undefined {
    return inSqliteStatementSpan(
      BY_CODE,
      () => this.find(code),
      (target) => (target === undefined ? 0 : 1),
    );
  }
}

interface Waiter {
  readonly code: string;
  resolve(target: RedirectTarget | undefined): void;
  reject(error: unknown): void;
}

/** Codes per statement at most. */
const MAX_BATCH = 500;

/**
 * PostgreSQL: lookups by code gathered over one turn of the event loop and answered by one
 * statement per batch (`WHERE code = ANY($1)`), so that a burst of cache misses takes a few
 * pooled connections instead of queueing for one each. The caller (the redirect cache) keeps
 * an answer only if nothing invalidated its code while the statement ran.
 */
export class BatchedTargetLookup {
  private waiting: Waiter[] = [];

  constructor(private readonly query: (codes: readonly string[]) => Promise<readonly CodedTarget[]>) {}

  find(code: string): Promise<RedirectTarget | undefined> {
    return new Promise((resolve, reject) => {
      if (this.waiting.length === 0) setImmediate(() => this.flush());
      this.waiting.push({ code, resolve, reject });
    });
  }

  private flush(): void {
    const waiting = this.waiting;
    this.waiting = [];
    for (let start = 0; start < waiting.length; start += MAX_BATCH) this.run(waiting.slice(start, start + MAX_BATCH));
  }

  private run(batch: readonly Waiter[]): void {
    const codes = [...new Set(batch.map((w) => w.code))];
    this.query(codes).then(
      (rows) => {
        const found = new Map(rows.map((row) => [row.code, row]));
        for (const waiter of batch) {
          const row = found.get(waiter.code);
          waiter.resolve(row && withoutCode(row));
        }
      },
      (error: unknown) => {
        for (const waiter of batch) waiter.reject(error);
      },
    );
  }
}

/** The target of a batched row (a row of its own: the code is not part of a target). */
function withoutCode(row: CodedTarget): RedirectTarget {
  const { code: _code, ...target } = row;
  return target;
}
