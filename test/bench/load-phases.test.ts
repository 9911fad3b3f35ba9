import { describe, expect, it } from 'vitest';
import { LoadPhases, phaseList } from '../../bench/lib/phases.js';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("a dataset load's phases", () => {
  it('keeps the order phases first started in, adds a phase run again, and counts one that failed', async () => {
    const phases = new LoadPhases();
    await phases.time('copy', () => pause(30));
    await Promise.all([phases.time('a', () => pause(60)), phases.time('b', () => pause(20))]);
    await phases.time('b', () => pause(20));
    await expect(phases.time('vacuum', () => Promise.reject(new Error('gone')))).rejects.toThrow('gone');
    const record = phases.record();
    expect(Object.keys(record)).toEqual(['copy', 'a', 'b', 'vacuum']);
    expect(record.a).toBeGreaterThanOrEqual(0.05);
    expect(record.b).toBeGreaterThanOrEqual(0.03); // 20 ms twice
    expect(record.vacuum).toBeGreaterThanOrEqual(0);
    expect(phaseList({ copy: 28.14, url_trgm: 97 })).toBe('copy 28.1 s, url_trgm 97.0 s');
  });
});
