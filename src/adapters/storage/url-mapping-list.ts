import { type Expression, type Kysely, type RawBuilder, sql, type SqlBool } from 'kysely';
import type { UrlMapping } from '../../domain/url-mapping.js';
import type { ListOptions, ListSort } from '../../ports/url-mapping-repository.js';
import type { Dialect } from './database.js';
import { sqliteInstantOrder } from './instant-order.js';
import type { DatabaseSchema } from './schema.js';

/** A mapping's count as every read shows it: what is folded into its row plus its pending deltas. */
const clickCount = (table: 'url_mappings' | 'anchor') =>
  sql<number>`${sql.ref(`${table}.click_count`)} + COALESCE(
    (SELECT d.delta FROM url_click_deltas AS d WHERE d.url_id = ${sql.ref(`${table}.id`)}), 0)`;

export const CLICK_COUNT = clickCount('url_mappings').as('click_count');
export const READ_COLUMNS = [
  'id',
  'code',
  'url',
  'created_at',
  CLICK_COUNT,
  'owner_id as owner',
  'expires_at',
  'max_visits',
] as const;

/**
 * A row as the repository answers it: `expires_at` and `max_visits` only when set, so that a
 * mapping without limits is the same object it always was (its read view is spec §2.1's).
 */
export function withLimitsIfSet<R extends UrlMapping>(row: R): R {
  if (row.expires_at != null && row.max_visits != null) return row;
  const { expires_at, max_visits, ...rest } = row;
  if (expires_at != null) return { ...rest, expires_at } as R;
  if (max_visits != null) return { ...rest, max_visits } as R;
  return rest as R;
}

const ID_ORDER: ListSort = { field: 'id', descending: false };

/**
 * Whether the list sorts by an expression of its column: `created_at` on SQLite, its instant in an
 * order-preserving text (instant-order.ts), which migration 0062's indexes hold. SQLite reads no
 * range of such an index for a row value, so its keyset pages are read in two parts.
 */
const sortsByInstantText = (dialect: Dialect, sort: ListSort) => sort.field === 'created_at' && dialect === 'sqlite';

/** The value a mapping is sorted by, on `url_mappings`, on the keyset anchor or on a search's candidates. */
function sortKey(
  dialect: Dialect,
  sort: ListSort,
  table: 'url_mappings' | 'anchor' | 'candidates',
): RawBuilder<unknown> {
  if (sort.field === 'click_count' && table !== 'candidates') return clickCount(table);
  const column = sql.ref(`${table}.${sort.field}`);
  return sortsByInstantText(dialect, sort) ? sqliteInstantOrder(column) : column;
}

/**
 * Which mappings after the keyset anchor a statement reads: all of them, or (SQLite, created_at)
 * first those whose key ties with the anchor's, then those beyond it (see `listMappings`).
 */
type AnchorPart = 'all' | 'ties' | 'beyond';

/** The list's options as one statement reads them. */
interface StatementOptions extends ListOptions {
  readonly part?: AnchorPart;
}

/**
 * After the mapping with id `after` in this order: `(key, id)` beyond the anchor's. With the id
 * order that is `id > after` whether or not the mapping is still there, as before sorting existed.
 * SQLite reads an index by a row value's first column only (and by an expression not at all), so
 * its created_at order asks in two parts, each a range of migration 0062's indexes: the anchor's
 * ties beyond its id, then the keys beyond its key.
 */
function afterCondition(dialect: Dialect, sort: ListSort, after: number, part: AnchorPart): Expression<SqlBool> {
  const beyond = sql.raw(sort.descending ? '<' : '>');
  if (sort.field === 'id') return sql<SqlBool>`url_mappings.id ${beyond} ${after}`;
  const key = sortKey(dialect, sort, 'url_mappings');
  const anchorKey = sortKey(dialect, sort, 'anchor');
  const anchor = sql`FROM url_mappings AS anchor WHERE anchor.id = ${after}`;
  if (part === 'ties')
    return sql<SqlBool>`${key} = (SELECT ${anchorKey} ${anchor}) AND url_mappings.id ${beyond} ${after}`;
  if (part === 'beyond') return sql<SqlBool>`${key} ${beyond} (SELECT ${anchorKey} ${anchor})`;
  return sql<SqlBool>`(${key}, url_mappings.id) ${beyond} (SELECT ${anchorKey}, anchor.id ${anchor})`;
}

/** `%q%` for LIKE, with LIKE's own wildcards in `q` taken literally (escape character `\`). */
const containing = (q: string) => `%${q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/**
 * Code or URL containing `q`, ignoring case, checked on the row itself: ILIKE on PostgreSQL,
 * `instr` on SQLite (ASCII case only; its LIKE would take `%` and `_` in `q` as wildcards).
 */
function matchesOnRow(dialect: Dialect, table: string, q: string): Expression<SqlBool> {
  const code = sql.ref(`${table}.code`);
  const url = sql.ref(`${table}.url`);
  if (dialect === 'postgres') {
    const pattern = containing(q);
    return sql<SqlBool>`(${code} ILIKE ${pattern} OR ${url} ILIKE ${pattern})`;
  }
  const lower = q.toLowerCase();
  return sql<SqlBool>`(instr(lower(${code}), ${lower}) > 0 OR instr(lower(${url}), ${lower}) > 0)`;
}

/** More candidates than this from the index, and the search reads the table instead. */
const INDEX_CANDIDATES_MAX = 100_000;

/**
 * The ids whose code or URL may contain `q`, from the search index of migration 0061 alone
 * (SQLite: the FTS5 trigram table; PostgreSQL: the pg_trgm GIN indexes), or undefined when there
 * are more than INDEX_CANDIDATES_MAX. A statement of its own, so that PostgreSQL's planner, which
 * cannot tell how rare a substring is, never walks the whole table in order looking for it.
 */
async function indexCandidates(db: Kysely<DatabaseSchema>, dialect: Dialect, q: string): Promise<number[] | undefined> {
  const cap = INDEX_CANDIDATES_MAX + 1;
  if (dialect === 'postgres') {
    const { rows } = await sql<{ id: number }>`SELECT id FROM url_mappings
      WHERE code ILIKE ${containing(q)} OR url ILIKE ${containing(q)} LIMIT ${cap}`.execute(db);
    return rows.length > INDEX_CANDIDATES_MAX ? undefined : rows.map((row) => Number(row.id));
  }
  // The index, and the rows not yet in it (see migration 0061), read directly.
  const { rows } = await sql<{ id: number }>`
    SELECT rowid AS id FROM url_mappings_search WHERE code LIKE ${`%${q}%`} OR url LIKE ${`%${q}%`}
    UNION ALL
    SELECT id FROM url_mappings
    WHERE id > (SELECT indexed_up_to FROM url_mappings_search_state) AND ${matchesOnRow(dialect, 'url_mappings', q)}
    LIMIT ${cap}`.execute(db);
  return rows.length > INDEX_CANDIDATES_MAX ? undefined : rows.map((row) => Number(row.id));
}

/**
 * SQLite: adds up to `limit` mappings not yet in the search index to it (the next ids after
 * `indexed_up_to`), in one transaction; answers how many ids it covered, 0 when caught up.
 * PostgreSQL's indexes follow every insert themselves: nothing to do.
 */
export async function indexSearch(db: Kysely<DatabaseSchema>, dialect: Dialect, limit: number): Promise<number> {
  if (dialect === 'postgres') return 0;
  return db.transaction().execute(async (trx) => {
    // The insert comes first, so the transaction takes the write lock before it reads the state.
    await sql`
      INSERT INTO url_mappings_search (rowid, code, url)
      SELECT id, code, url FROM url_mappings
      WHERE id > (SELECT indexed_up_to FROM url_mappings_search_state)
      ORDER BY id LIMIT ${limit}`.execute(trx);
    const { rows } = await sql<{ was: number; now: number }>`
      SELECT s.indexed_up_to AS was, COALESCE(
        (SELECT MAX(id) FROM (SELECT id FROM url_mappings WHERE id > s.indexed_up_to ORDER BY id LIMIT ${limit})),
        s.indexed_up_to) AS now
      FROM url_mappings_search_state AS s`.execute(trx);
    const { was, now } = rows[0]!;
    if (now > was) await sql`UPDATE url_mappings_search_state SET indexed_up_to = ${now}`.execute(trx);
    return now - was;
  });
}

function amongIds(dialect: Dialect, ids: readonly number[]): Expression<SqlBool> {
  return dialect === 'postgres'
    ? sql<SqlBool>`url_mappings.id = ANY(CAST(${ids} AS BIGINT[]))`
    : sql<SqlBool>`url_mappings.id IN (SELECT value FROM json_each(${JSON.stringify(ids)}))`;
}

/**
 * How many mappings, in the list's order, a search reads directly before it turns to the index.
 * The index answers a rare `q` at once but a common one slowly (every candidate is checked); the
 * first rows in order hold a page of a common `q`. A `q` that does not fill a page within these
 * rows is rare enough for the index.
 */
export const SCAN_FIRST = 5000;

type ListQuery = ReturnType<typeof baseQuery>;

/**
 * The list's statement without the search: filtered by owner and keyset, in order. `slim`: only
 * what finding and ordering need (no pending clicks looked up per row unless sorting by them).
 */
function baseQuery(
  db: Kysely<DatabaseSchema>,
  dialect: Dialect,
  options: StatementOptions,
  sort: ListSort,
  slim = false,
) {
  const direction = sort.descending ? 'desc' : 'asc';
  const columns = slim ? SLIM_COLUMNS[sort.field] : READ_COLUMNS;
  let query = db.selectFrom('url_mappings').select(columns as typeof READ_COLUMNS);
  if (options.owner === null) query = query.where('owner_id', 'is', null);
  else if (options.owner !== undefined) query = query.where('owner_id', '=', options.owner);
  if (options.after !== undefined)
    query = query.where(afterCondition(dialect, sort, options.after, options.part ?? 'all'));
  // The anchor's ties share its key: ordered by id alone, read in order from the index.
  if (sort.field !== 'id' && options.part !== 'ties')
    query = query.orderBy(sortKey(dialect, sort, 'url_mappings'), direction);
  return query.orderBy('url_mappings.id', direction);
}

const SLIM = ['id', 'code', 'url'] as const;
const SLIM_COLUMNS = {
  id: SLIM,
  created_at: [...SLIM, 'created_at'],
  click_count: [...SLIM, CLICK_COUNT],
} as const;

/** The first page of a search among the first SCAN_FIRST rows in order; undefined when not full. */
async function scanFirst(
  db: Kysely<DatabaseSchema>,
  dialect: Dialect,
  options: StatementOptions & { limit: number; q: string },
  sort: ListSort,
): Promise<UrlMapping[] | undefined> {
  const direction = sort.descending ? 'desc' : 'asc';
  let found = db
    .selectFrom(baseQuery(db, dialect, options, sort, true).limit(SCAN_FIRST).as('candidates'))
    .select('candidates.id')
    .where(matchesOnRow(dialect, 'candidates', options.q));
  if (sort.field !== 'id') found = found.orderBy(sortKey(dialect, sort, 'candidates'), direction);
  const rows = await found.orderBy('candidates.id', direction).limit(options.limit).execute();
  if (rows.length < options.limit) return undefined;
  const ids = rows.map((row) => Number(row.id));
  return baseQuery(db, dialect, options, sort).where(amongIds(dialect, ids)).execute();
}

/**
 * The mappings `options` asks for, in its order (see ListOptions). On SQLite, a created_at page
 * after an anchor is read in two statements (see `afterCondition`): the anchor's ties, then as
 * many beyond them as the page still has room for. One statement would walk every tie before
 * the anchor (all of an import's links can share one instant).
 */
export async function listMappings(
  db: Kysely<DatabaseSchema>,
  dialect: Dialect,
  options: ListOptions,
): Promise<UrlMapping[]> {
  const sort = options.sort ?? ID_ORDER;
  const read = (statement: StatementOptions) => findMappings(db, dialect, statement, sort);
  if (options.after === undefined || !sortsByInstantText(dialect, sort))
    return (await read(options)).map(withLimitsIfSet);
  const ties = await read({ ...options, part: 'ties' });
  const room = options.limit === undefined ? undefined : options.limit - ties.length;
  const rest = room === 0 ? [] : await read({ ...options, part: 'beyond', limit: room });
  return [...ties, ...rest].map(withLimitsIfSet);
}

async function findMappings(
  db: Kysely<DatabaseSchema>,
  dialect: Dialect,
  options: StatementOptions,
  sort: ListSort,
): Promise<UrlMapping[]> {
  const query = baseQuery(db, dialect, options, sort);
  const limited = (built: ListQuery) => (options.limit === undefined ? built : built.limit(options.limit));
  const q = options.q === '' ? undefined : options.q;
  if (q === undefined) return limited(query).execute();
  if (options.limit !== undefined) {
    const first = await scanFirst(db, dialect, { ...options, limit: options.limit, q }, sort);
    if (first) return first;
  }
  const ids = await indexCandidates(db, dialect, q);
  const searched = query.where(matchesOnRow(dialect, 'url_mappings', q));
  if (ids === undefined) return limited(searched).execute();
  if (ids.length === 0) return [];
  return limited(searched.where(amongIds(dialect, ids))).execute();
}
