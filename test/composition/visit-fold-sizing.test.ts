import { describe, expect, it } from 'vitest';
import { FOLD_SIZING, foldAll } from '../../src/composition/visits.js';
import type { FoldStep, VisitRepository } from '../../src/ports/visit-repository.js';
import { BatchSizer } from '../../src/support/batch-sizer.js';

/**
 * A repository whose steps take `wallMs` each (waiting, as for PostgreSQL's round trips) and say
 * they held the event loop for `heldMs`: the sizes a fold run asks for, step after step.
 */
async function sizesAsked(steps: number, wallMs: number, heldMs: number): Promise<number[]> {
  const asked: number[] = [];
  const writes: Pick<VisitRepository, 'foldMark' | 'fold'> = {
    foldMark: async () => 1,
    fold: async (segments, _upTo, after): Promise<FoldStep> => {
      asked.push(segments);
      await new Promise((resolve) => setTimeout(resolve, wallMs));
      return { segments, through: after < steps ? after + 1 : undefined, heldMs };
    },
  };
  await foldAll(writes, new BatchSizer(FOLD_SIZING));
  return asked;
}

describe('a fold run sizes its steps by what they held the event loop for', () => {
  it('grows them when each held it briefly, however long the step waited for its statements', async () => {
    const asked = await sizesAsked(6, 15, 0.2);
    expect(asked[0]).toBe(FOLD_SIZING.initial);
    for (let i = 1; i < asked.length; i++) expect(asked[i]!).toBeGreaterThan(asked[i - 1]!);
  });

  it('shrinks them in proportion when each held it longer than the target', async () => {
    const asked = await sizesAsked(3, 1, FOLD_SIZING.targetMs * 5);
    expect(asked.slice(0, 3)).toEqual([250, 50, 10]);
  });
});
