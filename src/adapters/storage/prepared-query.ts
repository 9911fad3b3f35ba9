import { type Compilable, type CompiledQuery, createQueryId, type Kysely, type QueryResult } from 'kysely';

/** Stands for a named parameter while the query is built; replaced by its value at each run. */
class Slot {
  constructor(readonly name: string) {}
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a slot goes where any value of any column goes
type SlotOf = (name: string) => any;

/**
 * A Kysely query built and compiled once, then run many times with new parameter values: for
 * statements on a hot path, where building and compiling cost more than SQLite takes to run
 * them. Plugins still see every run (the tracing plugin opens its span), but they must observe,
 * not rewrite: a prepared query cannot take a plugin's changes into account.
 *
 * @example
 *   const byCode = new PreparedQuery(db, (db, p) => db.selectFrom('url_mappings').selectAll().where('code', '=', p('code')));
 *   const { rows } = await byCode.run(db, { code: 'abc123' });
 */
export class PreparedQuery<DB, Row, Params extends object = Record<string, unknown>> {
  private readonly compiled: CompiledQuery<Row>;
  /** The parameter name at each position of the compiled statement, or a constant bound at build time. */
  private readonly bindings: readonly (Slot | unknown)[];

  constructor(db: Kysely<DB>, build: (db: Kysely<DB>, slot: SlotOf) => Compilable<Row>) {
    // Compiled without plugins: they see each run instead (see `run`).
    this.compiled = build(db.withoutPlugins(), (name) => new Slot(name)).compile();
    this.bindings = this.compiled.parameters;
  }

  /** Runs the statement on `db` (the database or a transaction) with `params`. */
  run(db: Kysely<DB>, params: Params): Promise<QueryResult<Row>> {
    const parameters = this.bindings.map((binding) =>
      binding instanceof Slot ? (params as Record<string, unknown>)[binding.name] : binding,
    );
    return execute(db, this.compiled, parameters);
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a slot goes where any value of any column goes
type RowSlotOf<Row> = (row: number, column: keyof Row & string) => any;

/** Stands for one column of one row of a multi-row insert while it is built. */
class RowSlot {
  constructor(
    readonly row: number,
    readonly column: string,
  ) {}
}

/**
 * A multi-row statement (an INSERT of many rows) built and compiled once for each row count it is
 * run with, on first use: any batch of up to `maxRows` rows is one statement, a larger one a
 * statement of `maxRows` rows at a time. Building and compiling a batch's insert anew (Kysely
 * parses every value) costs more than SQLite takes to run it; the statements of the few sizes a
 * batch has are kept (and prepared once by the driver).
 *
 * @example
 *   const insert = new PreparedRows(db, 100, (db, count, slot) =>
 *     db.insertInto('items').values(Array.from({ length: count }, (_, i) => ({ name: slot(i, 'name') }))),
 *   );
 *   await insert.run(trx, [{ name: 'a' }, { name: 'b' }]);
 */
export class PreparedRows<DB, Row extends object> {
  private readonly statements = new Map<number, CompiledQuery>();
  private readonly plain: Kysely<DB>;

  constructor(
    db: Kysely<DB>,
    private readonly maxRows: number,
    private readonly build: (db: Kysely<DB>, count: number, slot: RowSlotOf<Row>) => Compilable<unknown>,
  ) {
    if (!Number.isInteger(maxRows) || maxRows < 1) throw new Error('PreparedRows needs maxRows of at least 1');
    this.plain = db.withoutPlugins();
  }

  async run(db: Kysely<DB>, rows: readonly Row[]): Promise<void> {
    for (let start = 0; start < rows.length; start += this.maxRows) {
      const offset = start;
      const compiled = this.statement(Math.min(this.maxRows, rows.length - start));
      const parameters = compiled.parameters.map((binding) =>
        binding instanceof RowSlot ? (rows[offset + binding.row] as Record<string, unknown>)[binding.column] : binding,
      );
      await execute(db, compiled, parameters);
    }
  }

  private statement(count: number): CompiledQuery {
    let compiled = this.statements.get(count);
    if (compiled === undefined) {
      compiled = this.build(this.plain, count, (row, column) => new RowSlot(row, column)).compile();
      this.statements.set(count, compiled);
    }
    return compiled;
  }
}

/** Runs a compiled statement with new parameters; the plugins see the run (see PreparedQuery). */
function execute<DB, Row>(
  db: Kysely<DB>,
  compiled: CompiledQuery<Row>,
  parameters: readonly unknown[],
): Promise<QueryResult<Row>> {
  const executor = db.getExecutor();
  const queryId = createQueryId();
  const query = executor.transformQuery(compiled.query, queryId);
  if (query !== compiled.query) throw new Error('a prepared query cannot run through a plugin that rewrites it');
  return executor.executeQuery<Row>({ query, queryId, sql: compiled.sql, parameters });
}
