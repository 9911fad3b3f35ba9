import { type Clock, systemClock } from '../../ports/clock.js';
import type { Counters, CounterState } from '../../ports/counters.js';

interface Entry {
  count: number;
  /** Clock time (ms) at which the entry expires; Infinity for versions. */
  expiresAt: number;
}

const SWEEP_EVERY_WRITES = 1024;

/**
 * Counters in this process's memory: the embedded default, for a single instance. Expiry follows
 * the injected clock; expired entries are dropped when read and swept every few hundred writes,
 * so memory stays bounded by what is live.
 */
export class MemoryCounters implements Counters {
  private readonly entries = new Map<string, Entry>();
  private writes = 0;

  constructor(private readonly clock: Clock = systemClock) {}

  async increment(key: string, ttlMs: number): Promise<number> {
    const entry = this.live(key);
    const count = (entry?.count ?? 0) + 1;
    this.write(key, { count, expiresAt: this.clock.now() + ttlMs });
    return count;
  }

  async get(key: string): Promise<CounterState | undefined> {
    const entry = this.live(key);
    return entry && { count: entry.count, ttlMs: entry.expiresAt - this.clock.now() };
  }

  async delete(key: string): Promise<void> {
    this.entries.delete(key);
  }

  async setFlag(key: string, ttlMs: number): Promise<void> {
    if (ttlMs <= 0) return;
    this.write(key, { count: 1, expiresAt: this.clock.now() + ttlMs });
  }

  async hasFlag(key: string): Promise<boolean> {
    return this.live(key) !== undefined;
  }

  async bump(key: string): Promise<number> {
    const count = (this.live(key)?.count ?? 0) + 1;
    this.write(key, { count, expiresAt: Number.POSITIVE_INFINITY });
    return count;
  }

  async version(key: string): Promise<number> {
    return this.live(key)?.count ?? 0;
  }

  async close(): Promise<void> {
    this.entries.clear();
  }

  private live(key: string): Entry | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= this.clock.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry;
  }

  private write(key: string, entry: Entry): void {
    this.entries.set(key, entry);
    if (++this.writes % SWEEP_EVERY_WRITES === 0) this.sweep();
  }

  private sweep(): void {
    const now = this.clock.now();
    for (const [key, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(key);
  }
}
