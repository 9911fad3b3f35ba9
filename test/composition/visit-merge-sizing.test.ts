import { describe, expect, it } from 'vitest';
import { MERGE_SIZING, mergeJournal } from '../../src/composition/visits.js';
import { encodeJournal } from '../../src/domain/visit-journal.js';
import type { JournalRow, MergeDone, VisitJournal } from '../../src/ports/visit-journal.js';
import { BatchSizer } from '../../src/support/batch-sizer.js';
import { UserAgentClassifier } from '../../src/support/user-agents.js';
import { CaptureJournal, VisitCapture } from '../../src/support/visit-capture.js';

/** A journal row of one visit to each of `links` links, as a flush writes it. */
function journalText(links: number): Uint8Array {
  const capture = new VisitCapture();
  const start = Date.UTC(2026, 10, 28, 12);
  for (let link = 1; link <= links; link++) capture.add(link, start + link, 'curl/8.5.0', '', '', '10.0.0.1');
  const prepared = new CaptureJournal(
    capture,
    new Map(capture.days().map((day) => [day, 'salt'])),
    new UserAgentClassifier(),
  );
  while (!prepared.done) prepared.take(100_000);
  return encodeJournal(prepared.visits());
}

/** A sizer that hands out `sizes` in turn and keeps what each step reported holding the loop for. */
class ScriptedSizer extends BatchSizer {
  readonly reported: number[] = [];
  private next = 0;

  constructor(private readonly sizes: readonly number[]) {
    super(MERGE_SIZING);
  }

  override get size(): number {
    return this.sizes[Math.min(this.next++, this.sizes.length - 1)]!;
  }

  override took(ms: number): void {
    this.reported.push(ms);
  }
}

/**
 * A journal holding one row of `links` links (a visit each) whose merge steps take `wallMs` each
 * (waiting, as for PostgreSQL's round trips) and say they held the event loop for `heldMs`: the
 * segments each step of a merge run was given.
 */
async function mergeRun(links: number, sizer: BatchSizer, wallMs: number, heldMs: number): Promise<number[]> {
  const given: number[] = [];
  let row: JournalRow | undefined = { id: 1, mergedThrough: 0, visits: links, data: journalText(links) };
  const journal: Pick<VisitJournal, 'mark' | 'pending' | 'merge'> = {
    mark: async () => 1,
    pending: async () => (row ? [row] : []),
    merge: async (step): Promise<MergeDone> => {
      given.push(step.segments.length);
      await new Promise((resolve) => setTimeout(resolve, wallMs));
      if (step.through === undefined) row = undefined;
      else row = { ...row!, mergedThrough: step.through };
      return { heldMs };
    },
  };
  expect(await mergeJournal(journal, { rows: 300, visits: 1_000_000 }, sizer)).toBe(links);
  return given;
}

describe('a merge run sizes its steps by what they held the event loop for', () => {
  it('writes groups of the sizer’s size, and reports each step’s held time and the making of its segments, not its wait', async () => {
    // Each step waits 250 ms: far more than making even 1,000 segments takes on a loaded machine
    // (25 once took 2.4 ms on CI's), so a reported time under it is one without the wait.
    const waitMs = 250;
    const sizer = new ScriptedSizer([300, 50, 7, 1_000]);
    const given = await mergeRun(1_357, sizer, waitMs, 0.5);
    expect(given).toEqual([300, 50, 7, 1_000]);
    expect(sizer.reported).toHaveLength(4);
    for (const ms of sizer.reported) {
      expect(ms).toBeGreaterThanOrEqual(0.5);
      expect(ms).toBeLessThan(waitMs);
    }
  });

  it('shrinks them in proportion when each held it longer than the target', async () => {
    const given = await mergeRun(2_000, new BatchSizer(MERGE_SIZING), 1, MERGE_SIZING.targetMs * 5);
    // (The second step's segments were made before the first had said how long it held; the
    // making of the segments counts too, so a step may shrink a little more than a fifth.)
    const { initial } = MERGE_SIZING;
    expect(given.slice(0, 2)).toEqual([initial, initial]);
    expect(given[2]).toBeLessThanOrEqual(Math.ceil(initial / 5));
    expect(given[3]).toBeLessThanOrEqual(Math.ceil(initial / 25));
  });

  it('starts small: a first step of a busy journal holds the loop for a few steps’ worth, not a run’s', () => {
    expect(MERGE_SIZING.initial).toBeLessThanOrEqual(50);
  });

  it('grows them only after a full step that was quick, not after a run’s last, partial one', async () => {
    // The time a step reports counts the making of its segments, measured on this machine's clock:
    // a target far above what making 50 segments takes, even on a loaded CI machine (one such run
    // took 2.4 ms to make 25, more than MERGE_SIZING's 2 ms, and its steps shrank), so that every step
    // here is quick and the test is about `full`, not about this machine's speed.
    const options = { ...MERGE_SIZING, targetMs: 400 };
    // Runs of few links (a quiet spell, or the tail of every run): each one step, short of the size.
    const sizer = new BatchSizer(options);
    for (let run = 0; run < 20; run++) await mergeRun(3, sizer, 0, 0.1);
    expect(sizer.size).toBe(options.initial);
    // Full steps that were quick: a quarter larger each (the second made before the first reported).
    const { initial } = options;
    const given = await mergeRun(1_000, sizer, 0, 0.1);
    expect(given.slice(0, 4)).toEqual([
      initial,
      initial,
      Math.ceil(initial * 1.25),
      Math.ceil(Math.ceil(initial * 1.25) * 1.25),
    ]);
  });
});
