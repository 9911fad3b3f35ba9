/**
 * One page of rows: asks `fetch` for one row more than `limit`, so that whether a next page
 * exists is known without a second query. With no limit, everything is one page.
 */
export async function fetchPage<T>(
  limit: number | undefined,
  fetch: (limit: number | undefined) => Promise<T[]>,
): Promise<{ items: T[]; more: boolean }> {
  const rows = await fetch(limit === undefined ? undefined : limit + 1);
  const more = limit !== undefined && rows.length > limit;
  return { items: more ? rows.slice(0, limit) : rows, more };
}
