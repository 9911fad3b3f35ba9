import { type Context, context } from '@opentelemetry/api';
import { CompiledQuery, type Kysely } from 'kysely';
import { writesAskedSince } from './database.js';

/** A unit of work of one write transaction: everything it writes commits together, or nothing does. */
export type TransactionWork<DB, T> = (trx: Kysely<DB>) => Promise<T>;

interface Unit<DB> {
  readonly work: TransactionWork<DB, unknown>;
  /** The caller's trace context: the unit's statements and events belong to its request. */
  readonly context: Context;
  /** When it was handed in (`performance.now()`). */
  readonly arrivedAt: number;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

const runIn = <DB>(unit: Unit<DB>, trx: Kysely<DB>) => context.with(unit.context, () => unit.work(trx));

const SAVEPOINT = CompiledQuery.raw('SAVEPOINT group_unit');
const RELEASE = CompiledQuery.raw('RELEASE SAVEPOINT group_unit');
const ROLLBACK_TO = CompiledQuery.raw('ROLLBACK TO SAVEPOINT group_unit');

/**
 * Group commit for a single-writer database (SQLite): write transactions that arrive together,
 * during one turn of the event loop or while the previous group commits, share one transaction
 * and so one commit, which costs more than the writes themselves. A unit that fails (a taken
 * code) is rolled back alone and its caller alone sees the error: the group then runs again with
 * a savepoint around each unit, so a unit's work must do nothing outside the transaction that
 * cannot be done twice. A unit's promise resolves only once the shared transaction has
 * committed: nothing is acknowledged before it is durable.
 *
 * @example
 *   const writes = new GroupCommit(db);
 *   const row = await writes.run((trx) => trx.insertInto('url_mappings').values(mapping).executeTakeFirstOrThrow());
 */
export class GroupCommit<DB> {
  private queue: Unit<DB>[] = [];
  private draining = false;

  constructor(
    readonly db: Kysely<DB>,
    /** Most units one transaction takes; the rest wait for the next. */
    private readonly maxUnits = 256,
  ) {}

  run<T>(work: TransactionWork<DB, T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({
        work,
        context: context.active(),
        arrivedAt: performance.now(),
        resolve: resolve as (value: unknown) => void,
        reject,
      });
      if (!this.draining) {
        this.draining = true;
        // After this turn's other requests have queued theirs.
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const units = this.queue.length <= this.maxUnits ? this.queue : this.queue.slice(0, this.maxUnits);
      this.queue = this.queue.length <= this.maxUnits ? [] : this.queue.slice(this.maxUnits);
      await (units.length === 1 ? this.commitOne(units[0]!) : this.commitGroup(units));
    }
    this.draining = false;
  }

  private async commitOne(unit: Unit<DB>): Promise<void> {
    try {
      unit.resolve(await this.transaction([unit], (trx) => runIn(unit, trx)));
    } catch (error) {
      unit.reject(error);
    }
  }

  /**
   * The group in one transaction, optimistically without savepoints (they cost two statements a
   * unit); when a unit fails, the whole attempt is rolled back and the group runs again with a
   * savepoint around each unit, so the failure stays its own. When the transaction could not even
   * begin (the database locked by another process past the busy timeout, or away), no unit failed
   * on its own: all are refused at once, not made to wait a second time.
   */
  private async commitGroup(units: readonly Unit<DB>[]): Promise<void> {
    let values: unknown[];
    let began = false;
    try {
      values = await this.transaction(units, async (trx) => {
        began = true;
        const results: unknown[] = [];
        for (const unit of units) results.push(await runIn(unit, trx));
        return results;
      });
    } catch (error) {
      if (!began) {
        for (const unit of units) unit.reject(error);
        return;
      }
      return this.commitWithSavepoints(units);
    }
    units.forEach((unit, i) => unit.resolve(values[i]));
  }

  /**
   * A transaction for `units`, waiting for the write lock as long as the oldest of them may: from
   * its arrival, not from when the group got its turn (behind a group that waited itself).
   */
  private transaction<T>(units: readonly Unit<DB>[], work: TransactionWork<DB, T>): Promise<T> {
    return writesAskedSince(units[0]!.arrivedAt, () => this.db.transaction().execute(work));
  }

  private async commitWithSavepoints(units: readonly Unit<DB>[]): Promise<void> {
    const succeeded: { unit: Unit<DB>; value: unknown }[] = [];
    const failed: { unit: Unit<DB>; error: unknown }[] = [];
    try {
      await this.db.transaction().execute(async (trx) => {
        for (const unit of units) {
          await trx.executeQuery(SAVEPOINT);
          try {
            succeeded.push({ unit, value: await runIn(unit, trx) });
          } catch (error) {
            await trx.executeQuery(ROLLBACK_TO);
            failed.push({ unit, error });
          }
          await trx.executeQuery(RELEASE);
        }
      });
    } catch (error) {
      // The shared transaction did not commit: no unit wrote anything, and none that had not
      // failed on its own may be acknowledged.
      const settled = new Set(failed.map((f) => f.unit));
      for (const unit of units) if (!settled.has(unit)) unit.reject(error);
      for (const { unit, error: own } of failed) unit.reject(own);
      return;
    }
    for (const { unit, value } of succeeded) unit.resolve(value);
    for (const { unit, error } of failed) unit.reject(error);
  }
}
