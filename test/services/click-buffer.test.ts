import { afterEach, describe, expect, it, vi } from 'vitest';
import type { OutgoingEvent } from '../../src/domain/events.js';
import { urlEvents } from '../../src/domain/url-events.js';
import type {
  ClickChunk,
  ClickCompaction,
  CompactOptions,
  UrlMappingRepository,
} from '../../src/ports/url-mapping-repository.js';
import { ClickBuffer } from '../../src/support/click-buffer.js';
import { gate } from '../helpers/gate.js';

type Clicks = ReadonlyArray<readonly [id: number, count: number]>;

/**
 * What the buffer asks of its repository, recorded, adding a chunk once per writer and seq as the
 * port says; `compactClicks` answers from `chunks`. (The real repositories' lost answers are in
 * test/storage/click-lost-commit.test.ts.)
 */
class FakeRepository implements Pick<UrlMappingRepository, 'addClicks' | 'compactClicks' | 'forgetClickWriters'> {
  readonly writes: { clicks: Clicks; events: readonly OutgoingEvent[]; chunk?: ClickChunk }[] = [];
  readonly compactions: CompactOptions[] = [];
  readonly forgotten: number[] = [];
  failNextWrite = false;
  /** The next write goes in, and then fails as if the answer to its COMMIT were lost. */
  loseNextAnswer = false;
  private readonly lastSeq = new Map<string, number>();
  /** The `next` of successive compaction chunks; one call past the end answers done. */
  chunks: (number | undefined)[] = [];
  /** When set, a compaction chunk waits for it. */
  gate: Promise<void> | undefined;

  async addClicks(
    clicks: Clicks,
    events?: (written: Clicks) => readonly OutgoingEvent[],
    chunk?: ClickChunk,
  ): Promise<boolean> {
    if (this.failNextWrite) {
      this.failNextWrite = false;
      throw new Error('database away');
    }
    if (chunk) {
      if ((this.lastSeq.get(chunk.writer) ?? 0) >= chunk.seq) return false;
      this.lastSeq.set(chunk.writer, chunk.seq);
    }
    this.writes.push({ clicks, events: events ? events(clicks) : [], ...(chunk ? { chunk } : {}) });
    if (this.loseNextAnswer) {
      this.loseNextAnswer = false;
      throw new Error('Connection terminated unexpectedly');
    }
    return true;
  }

  async forgetClickWriters(before: number): Promise<number> {
    this.forgotten.push(before);
    return 0;
  }

  async compactClicks(options: CompactOptions): Promise<ClickCompaction> {
    this.compactions.push(options);
    await this.gate;
    const next = this.chunks.shift();
    return next === undefined ? { folded: 1 } : { folded: 1, next };
  }
}

const { clicked } = urlEvents('test');

describe('ClickBuffer', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('writes a flush in id order, 1,000 mappings a transaction, with one url.clicked event each', async () => {
    const repository = new FakeRepository();
    const buffer = new ClickBuffer(repository, { flushIntervalMs: 500, compactIntervalMs: 60_000 }, clicked);
    for (let id = 2500; id >= 1; id--) buffer.record(id);
    buffer.record(7);
    await buffer.flush();

    expect(repository.writes.map((w) => w.clicks.length)).toEqual([1000, 1000, 500]);
    const written = repository.writes.flatMap((w) => w.clicks);
    expect(written.map(([id]) => id)).toEqual(Array.from({ length: 2500 }, (_, i) => i + 1));
    expect(written.find(([id]) => id === 7)).toEqual([7, 2]);
    for (const write of repository.writes) {
      expect(write.events).toHaveLength(1);
      expect(write.events[0]!.envelope.payload).toEqual({
        clicks: write.clicks.map(([id, count]) => ({ id, count })),
      });
    }
    expect(buffer.pending(7)).toBe(0);
  });

  it('writes a chunk only between reads of counts: it waits for those under way, and those asked for meanwhile wait for it', async () => {
    const repository = new FakeRepository();
    const buffer = new ClickBuffer(repository, { flushIntervalMs: 500, compactIntervalMs: 60_000 });
    buffer.record(1);
    buffer.record(1);
    const firstRead = gate();
    const order: string[] = [];
    const read = (name: string, until?: Promise<void>) =>
      buffer.readCounts(
        async () => {
          order.push(`${name} reads`);
          await until;
          return repository.writes.length * 2; // what the "database" shows: both clicks once written
        },
        (stored, pending) => {
          order.push(`${name} sees ${stored + pending(1)}`);
          return stored + pending(1);
        },
      );
    const first = read('first', firstRead.opened);
    await Promise.resolve();
    const write = repository.addClicks.bind(repository);
    repository.addClicks = (...args) => {
      order.push('written');
      return write(...args);
    };
    const flushed = buffer.flush();
    const second = read('second');
    await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual(['first reads']); // the chunk waits for the first read, the second read for the chunk
    firstRead.open();
    await Promise.all([first, flushed, second]);
    expect(order).toEqual(['first reads', 'first sees 2', 'written', 'second reads', 'second sees 2']);
  });

  it('a read of counts that fails lets the chunk waiting for it be written', async () => {
    const repository = new FakeRepository();
    const buffer = new ClickBuffer(repository, { flushIntervalMs: 500, compactIntervalMs: 60_000 });
    buffer.record(1);
    const failing = gate();
    const read = buffer.readCounts(
      async () => {
        await failing.opened;
        throw new Error('database away');
      },
      () => 0,
    );
    const flushed = buffer.flush();
    await new Promise((resolve) => setImmediate(resolve));
    expect(repository.writes).toEqual([]);
    failing.open();
    await expect(read).rejects.toThrow('database away');
    await flushed;
    expect(repository.writes.map((w) => w.clicks)).toEqual([[[1, 1]]]);
    expect(buffer.pending(1)).toBe(0);
  });

  /** A buffer with a click on each of mappings 1 and 2, whose flush of them just failed. */
  const afterAFailedFlush = async () => {
    const repository = new FakeRepository();
    const buffer = new ClickBuffer(repository, { flushIntervalMs: 500, compactIntervalMs: 60_000 });
    buffer.record(1);
    buffer.record(2);
    repository.failNextWrite = true;
    await buffer.flush();
    return { repository, buffer };
  };

  it('writes the chunk of a failed write again, as it is and first, at the next flush', async () => {
    const { repository, buffer } = await afterAFailedFlush();
    expect([buffer.pending(1), buffer.pending(2)]).toEqual([1, 1]);
    buffer.record(1);
    await buffer.flush();
    expect(repository.writes.map((w) => [w.chunk?.seq, w.clicks])).toEqual([
      [
        1,
        [
          [1, 1],
          [2, 1],
        ],
      ],
      [2, [[1, 1]]],
    ]);
    expect(new Set(repository.writes.map((w) => w.chunk?.writer)).size).toBe(1);
    expect([buffer.pending(1), buffer.pending(2)]).toEqual([0, 0]);
  });

  it('a chunk whose write went in but whose answer was lost is not counted twice, nor its event sent twice', async () => {
    const repository = new FakeRepository();
    const buffer = new ClickBuffer(repository, { flushIntervalMs: 500, compactIntervalMs: 60_000 }, clicked);
    buffer.record(1);
    buffer.record(1);
    repository.loseNextAnswer = true;
    await buffer.flush();
    expect(buffer.pending(1)).toBe(2); // unknown: counted as pending until written again
    buffer.record(1);
    await buffer.flush();
    // The first chunk was asked again and refused as in already; then the new click.
    expect(repository.writes.map((w) => [w.chunk?.seq, w.clicks])).toEqual([
      [1, [[1, 2]]],
      [2, [[1, 1]]],
    ]);
    expect(repository.writes.flatMap((w) => w.events)).toHaveLength(2);
    expect(buffer.pending(1)).toBe(0);
  });

  it('a chunk that failed is written again without the clicks of a mapping discarded meanwhile', async () => {
    const { repository, buffer } = await afterAFailedFlush();
    await buffer.discard(2);
    expect(buffer.pending(2)).toBe(0);
    await buffer.flush();
    expect(repository.writes.map((w) => w.clicks)).toEqual([[[1, 1]]]);
  });

  it('compacts chunk after chunk from where the last ended; calls meanwhile share the run', async () => {
    const repository = new FakeRepository();
    repository.chunks = [40, 90];
    const buffer = new ClickBuffer(repository, { flushIntervalMs: 500, compactIntervalMs: 60_000 });
    const before = Date.now();
    await Promise.all([buffer.compact(), buffer.compact()]);
    // Writers not heard of for a week are forgotten first, once a run.
    expect(repository.forgotten).toHaveLength(1);
    expect(repository.forgotten[0]).toBeGreaterThanOrEqual(before - 7 * 24 * 3_600_000);
    expect(repository.forgotten[0]).toBeLessThanOrEqual(Date.now() - 7 * 24 * 3_600_000);
    expect(repository.compactions).toEqual([
      { after: undefined, limit: 500 },
      { after: 40, limit: 500 },
      { after: 90, limit: 500 },
    ]);
  });

  it('on stop, lets a compaction under way end after its current chunk, then writes what is buffered', async () => {
    const repository = new FakeRepository();
    repository.chunks = [10, 20, 30];
    let open!: () => void;
    repository.gate = new Promise((resolve) => (open = resolve));
    const buffer = new ClickBuffer(repository, { flushIntervalMs: 500, compactIntervalMs: 60_000 });
    const compacting = buffer.compact();
    buffer.record(5);
    const stopped = buffer.stop();
    open();
    await Promise.all([compacting, stopped]);
    expect(repository.compactions).toHaveLength(1);
    expect(repository.writes.map((w) => w.clicks)).toEqual([[[5, 1]]]);
  });

  it('flushes every interval and compacts once the compaction interval has passed', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] });
    const repository = new FakeRepository();
    const buffer = new ClickBuffer(repository, { flushIntervalMs: 500, compactIntervalMs: 2_000 });
    buffer.start({ error: () => undefined });
    buffer.record(1);
    await vi.advanceTimersByTimeAsync(500);
    await buffer.flush();
    expect(repository.writes).toHaveLength(1);
    expect(repository.compactions).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1_500);
    expect(repository.compactions).toHaveLength(1);
    await buffer.stop();
  });

  it('compacts after writing clicks for 100,000 mappings, before the interval', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'Date'] });
    const repository = new FakeRepository();
    const buffer = new ClickBuffer(repository, { flushIntervalMs: 500, compactIntervalMs: 3_600_000 });
    buffer.start({ error: () => undefined });
    for (let id = 1; id < 100_000; id++) buffer.record(id);
    await buffer.flush();
    await vi.advanceTimersByTimeAsync(500);
    expect(repository.compactions).toHaveLength(0);
    buffer.record(1);
    buffer.record(100_000);
    await buffer.flush();
    await vi.advanceTimersByTimeAsync(500);
    expect(repository.compactions).toHaveLength(1);
    await buffer.stop();
  });
});
