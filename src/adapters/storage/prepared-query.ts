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
    const executor = db.getExecutor();
    const queryId = createQueryId();
    const query = executor.transformQuery(this.compiled.query, queryId);
    if (query !== this.compiled.query) throw new Error('a prepared query cannot run through a plugin that rewrites it');
    const parameters = this.bindings.map((binding) =>
      binding instanceof Slot ? (params as Record<string, unknown>)[binding.name] : binding,
    );
    return executor.executeQuery<Row>({ query, queryId, sql: this.compiled.sql, parameters });
  }
}
