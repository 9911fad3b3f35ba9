/**
 * The visit buffer's flushes against a journal of the test's own (its writes held open by the
 * test), to see in which flush each visit is written; the repositories themselves are tested on
 * both backends elsewhere (test/http/visits.test.ts, test/backends/visit-writer-failures.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { dayOf } from '../../src/domain/visit.js';
import { decodeJournal } from '../../src/domain/visit-journal.js';
import type { JournalEntry } from '../../src/ports/visit-journal.js';
import { VisitBuffer } from '../../src/support/visit-buffer.js';
import { eventually } from '../helpers/eventually.js';

const HEADERS = ['User-Agent', 'curl/8.5.0'];

/** A journal row's links and their visits. */
function linksOf(entry: JournalEntry): number[][] {
  const { links, starts } = decodeJournal(entry.data);
  return Array.from(links, (link, k) => [link, starts[k + 1]! - starts[k]!]);
}

/** A repository whose writes wait until the test lets them finish, recording every journal row. */
function heldRepository() {
  const written: JournalEntry[] = [];
  const waiting: Array<() => void> = [];
  return {
    written,
    /** Lets the oldest write still waiting finish. */
    release: () => waiting.shift()?.(),
    get waiting() {
      return waiting.length;
    },
    repository: {
      async write(batch: JournalEntry) {
        await new Promise<void>((resolve) => waiting.push(resolve));
        written.push(batch);
        return true;
      },
      daySalt: async () => 'salt',
    },
  };
}

/** Lets what is due run (for checking that something did not happen). */
const settle = () => new Promise((resolve) => setTimeout(resolve, 10));
/** Until a write is waiting: awaited, not a fixed wait, which a loaded machine can outlast. */
const started = (held: { readonly waiting: number }) => eventually(() => expect(held.waiting).toBe(1));

describe('VisitBuffer', () => {
  it('a flush asked for while one is writing writes what was captured meanwhile as soon as that one ends', async () => {
    const held = heldRepository();
    const buffer = new VisitBuffer(held.repository, { flushIntervalMs: 60_000 });
    buffer.record(1, HEADERS, '10.0.0.1');
    const first = buffer.flush();
    await started(held);
    // Captured while the first flush writes; the next tick of the timer comes now.
    buffer.record(2, HEADERS, '10.0.0.2');
    const second = buffer.flush();
    held.release();
    await first;
    await started(held); // the follow-up write started without another tick
    held.release();
    await second;
    expect(held.written.map(linksOf)).toEqual([[[1, 1]], [[2, 1]]]);
    expect(buffer.size).toBe(0);
  });

  it('a flush asked for while one is writing adds nothing when nothing was captured meanwhile', async () => {
    const held = heldRepository();
    const buffer = new VisitBuffer(held.repository, { flushIntervalMs: 60_000 });
    buffer.record(1, HEADERS, '10.0.0.1');
    const first = buffer.flush();
    const second = buffer.flush();
    await settle();
    held.release();
    await Promise.all([first, second]);
    expect(held.waiting).toBe(0);
    expect(held.written).toHaveLength(1);
  });

  it('counts the visits of a flush still waiting for the day salt, and keeps them when it fails', async () => {
    let fail: (error: Error) => void = () => undefined;
    const repository = {
      write: async () => true,
      daySalt: () => new Promise<string>((_, reject) => (fail = reject)),
    };
    const buffer = new VisitBuffer(repository, { flushIntervalMs: 60_000 });
    buffer.record(1, HEADERS, '10.0.0.1');
    buffer.record(2, HEADERS, '10.0.0.2');
    const flushing = buffer.flush();
    await settle();
    buffer.record(3, HEADERS, '10.0.0.3');
    expect(buffer.size).toBe(3); // two in the flush under way, one captured since
    fail(new Error('database away'));
    await flushing;
    expect(buffer.size).toBe(3);
  });

  it('a visit of the next day captured while the flush waits for a salt is written with its own day’s salt', async () => {
    const midnight = Date.UTC(2026, 10, 28);
    let now = midnight - 1;
    const asked: number[] = [];
    const answers: Array<() => void> = [];
    const written: JournalEntry[] = [];
    const repository = {
      write: async (batch: JournalEntry) => {
        written.push(batch);
        return true;
      },
      daySalt: (day: number) => {
        asked.push(day);
        return new Promise<string>((resolve) => answers.push(() => resolve(`salt-${day}`)));
      },
    };
    const buffer = new VisitBuffer(repository, { flushIntervalMs: 60_000, now: () => now });
    buffer.record(1, HEADERS, '10.0.0.1');
    const flushing = buffer.flush();
    await settle();
    now = midnight;
    buffer.record(1, HEADERS, '10.0.0.1');
    answers.shift()!();
    await settle();
    answers.shift()!();
    await flushing;
    const day = midnight / 86_400_000;
    expect(asked).toEqual([day - 1, day]);
    expect(written.flatMap((b) => Array.from(decodeJournal(b.data).times, dayOf))).toEqual([day - 1, day]);
    expect(buffer.size).toBe(0);
  });

  it('flushes a full capture without waiting for the timer, once however many visits come while it writes', async () => {
    const held = heldRepository();
    const buffer = new VisitBuffer(held.repository, { flushIntervalMs: 60_000, flushAtVisits: 3 });
    const quiet = { error: () => undefined, warn: () => undefined };
    buffer.record(1, HEADERS, '10.0.0.1');
    buffer.record(2, HEADERS, '10.0.0.2');
    await settle();
    expect(held.waiting).toBe(0); // not started: only the timer flushes
    buffer.start(quiet);
    buffer.record(3, HEADERS, '10.0.0.3');
    await started(held); // full: a flush is writing, 60 s before the timer's
    for (let i = 4; i <= 9; i++) buffer.record(i, HEADERS, `10.0.0.${i}`);
    await settle();
    expect(held.waiting).toBe(1);
    held.release();
    await started(held); // the six captured meanwhile: one flush more, after it
    held.release();
    await settle();
    expect(held.waiting).toBe(0);
    expect(held.written.map((batch) => batch.visits)).toEqual([3, 6]);
    buffer.record(10, HEADERS, '10.0.0.10');
    await settle();
    expect(held.waiting).toBe(0); // one captured: waits for the timer (or the stop)
    const stopping = buffer.stop();
    await settle();
    held.release();
    await stopping;
    expect(held.written.map((batch) => batch.visits)).toEqual([3, 6, 1]);
    expect(buffer.size).toBe(0);
  });

  it('a full capture whose flush fails is retried by the timer, not by every visit after it', async () => {
    let away = true;
    let asked = 0;
    const written: JournalEntry[] = [];
    const repository = {
      write: async (batch: JournalEntry) => {
        written.push(batch);
        return true;
      },
      daySalt: async () => {
        asked++;
        if (away) throw new Error('database away');
        return 'salt';
      },
    };
    const buffer = new VisitBuffer(repository, { flushIntervalMs: 60_000, flushAtVisits: 2 });
    buffer.start({ error: () => undefined, warn: () => undefined });
    for (let i = 1; i <= 10; i++) {
      buffer.record(i, HEADERS, `10.0.0.${i}`);
      await settle();
    }
    expect(asked).toBe(1);
    expect(buffer.size).toBe(10);
    away = false;
    await buffer.flush(); // the timer's tick
    expect(written.reduce((sum, batch) => sum + batch.visits, 0)).toBe(10);
    buffer.record(11, HEADERS, '10.0.0.11');
    buffer.record(12, HEADERS, '10.0.0.12');
    // A new capture, full again: its flush starts by itself (awaited, not timed: a fixed 10 ms was
    // too short for its turns on a loaded machine).
    await eventually(() => expect(written.reduce((sum, batch) => sum + batch.visits, 0)).toBe(12));
    await buffer.stop();
  });
});
