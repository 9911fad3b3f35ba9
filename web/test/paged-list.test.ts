import { describe, expect, it } from 'vitest';
import { ApiError } from '../src/lib/auth-store';
import { PagedList } from '../src/lib/paged-list.svelte';

/** Pages of numbers, `size` a page, `after` the last number seen; records the cursors asked for. */
function numbers(total: number, size = 2) {
  const asked: (string | undefined)[] = [];
  const read = async (after: string | undefined) => {
    asked.push(after);
    const from = after === undefined ? 1 : Number(after) + 1;
    const items = Array.from({ length: Math.max(0, Math.min(size, total - from + 1)) }, (_, i) => from + i);
    const last = items.at(-1);
    return { items, next: last !== undefined && last < total ? new URLSearchParams({ after: String(last) }) : null };
  };
  return { read, asked };
}

describe('PagedList', () => {
  it('loads the first page, then pages forth and back by the cursors of the Link header', async () => {
    const { read, asked } = numbers(5);
    const list = new PagedList(read);
    expect(list.loading).toBe(true);
    await list.load();
    expect(list).toMatchObject({ items: [1, 2], loading: false, error: '', pageNumber: 1 });
    expect([list.hasPrevious, list.hasNext]).toEqual([false, true]);
    await list.nextPage();
    await list.nextPage();
    expect(list.items).toEqual([5]);
    expect([list.pageNumber, list.hasPrevious, list.hasNext]).toEqual([3, true, false]);
    await list.previousPage();
    expect(list.items).toEqual([3, 4]);
    await list.load();
    expect(list.items).toEqual([3, 4]);
    await list.restart();
    expect([list.items, list.pageNumber]).toEqual([[1, 2], 1]);
    expect(asked).toEqual([undefined, '2', '4', '2', '2', undefined]);
  });

  it('stays on the first page when asked for the one before it, and on the last without a next', async () => {
    const { read, asked } = numbers(1);
    const list = new PagedList(read);
    await list.previousPage();
    await list.nextPage();
    expect([list.items, list.pageNumber]).toEqual([[1], 1]);
    expect(asked).toEqual([undefined, undefined]);
  });

  it('takes the cursor from the parameter it is told (`before` for newest-first lists)', async () => {
    const asked: (string | undefined)[] = [];
    const read = async (before: string | undefined) => {
      asked.push(before);
      return { items: ['a'], next: new URLSearchParams({ before: 'x' }) };
    };
    const newestFirst = new PagedList(read, 'before');
    await newestFirst.load();
    await newestFirst.nextPage();
    expect(asked).toEqual([undefined, 'x']);
    const wrongParameter = new PagedList(read);
    await wrongParameter.load();
    expect(wrongParameter.hasNext).toBe(false);
  });

  it('says why a load failed, and whether the server has no such list; the next load clears it', async () => {
    let answer: () => Promise<{ items: number[]; next: null }> = async () => {
      throw new ApiError(503, 'Service unavailable');
    };
    const list = new PagedList(() => answer());
    await list.load();
    expect(list).toMatchObject({ error: 'Service unavailable', unavailable: false, loading: false, items: [] });
    answer = async () => ({ items: [7], next: null });
    await list.load();
    expect(list).toMatchObject({ error: '', items: [7] });
    answer = async () => {
      throw new ApiError(404, 'Not Found');
    };
    await list.load();
    expect(list).toMatchObject({ error: 'Not Found', unavailable: true, items: [7] });
  });
});
