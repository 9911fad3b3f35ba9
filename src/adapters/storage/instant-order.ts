import { type RawBuilder, sql } from 'kysely';

/**
 * SQLite keeps an instant as its canonical text (src/domain/timestamp.ts): the fraction of a
 * second has no trailing zeros, so as text `…:00.5Z` sorts after `…:00.52Z` and `…:00Z` after
 * both. This is the same instant with its fraction filled to six digits and no `Z`
 * (`2024-05-01T10:00:00500000`), whose text order is time's, to the microsecond.
 *
 * An index on it serves a query only when the query spells the same expression, constants written
 * inline (a bound parameter never matches an indexed expression): build both with this.
 */
export function sqliteInstantOrder(column: RawBuilder<unknown>): RawBuilder<string> {
  return sql<string>`(substr(${column}, 1, 19) || substr(rtrim(substr(${column}, 21), 'Z') || '000000', 1, 6))`;
}
