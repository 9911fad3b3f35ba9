/**
 * Where a dataset's load spent its time: each phase's wall time, in the order they started, so
 * that a load over its budget says which part to look at (bench/README.md, "Datasets").
 */
export class LoadPhases {
  private readonly seconds = new Map<string, number>();

  /** Runs `work` as the phase `name`; a phase run again (an index per connection) adds up. */
  async time<T>(name: string, work: () => Promise<T> | T): Promise<T> {
    if (!this.seconds.has(name)) this.seconds.set(name, 0); // its place: when it first started
    const started = performance.now();
    try {
      return await work();
    } finally {
      this.seconds.set(name, (this.seconds.get(name) ?? 0) + (performance.now() - started) / 1000);
    }
  }

  /** `{ name: seconds }`, in the order the phases first started. */
  record(): Record<string, number> {
    return Object.fromEntries([...this.seconds].map(([name, s]) => [name, Math.round(s * 1000) / 1000]));
  }
}

/** `copy 28.1 s, url_mappings_url_trgm 97.3 s, ...` of a `LoadPhases.record()`; overlapping phases each count whole. */
export function phaseList(record: Readonly<Record<string, number>>): string {
  return Object.entries(record)
    .map(([name, s]) => `${name} ${s.toFixed(1)} s`)
    .join(', ');
}
