import { describe, expect, it } from 'vitest';
import { BatchSizer } from '../../src/support/batch-sizer.js';

describe('BatchSizer', () => {
  const options = { initial: 100, min: 1, max: 1_000, targetMs: 2 };

  it('shrinks in proportion after a batch over the target', () => {
    const sizer = new BatchSizer(options);
    sizer.took(8); // 100 took 8 ms: 25 should take 2
    expect(sizer.size).toBe(25);
    sizer.took(2.5);
    expect(sizer.size).toBe(20);
  });

  it('keeps its size between half the target and the target, and grows by a quarter below half', () => {
    const sizer = new BatchSizer(options);
    sizer.took(1.5);
    sizer.took(2);
    expect(sizer.size).toBe(100);
    sizer.took(0.5);
    expect(sizer.size).toBe(125);
  });

  it('grows only after a full batch: one cut short by the end of the work says nothing of a full one', () => {
    const sizer = new BatchSizer(options);
    sizer.took(0.1, false);
    sizer.took(0, false);
    expect(sizer.size).toBe(100);
    sizer.took(0.1, true);
    expect(sizer.size).toBe(125);
    // A short one that took too long still shrinks it.
    sizer.took(5, false);
    expect(sizer.size).toBe(50);
  });

  it('finds a size whose batches take about the target, for a cost per item it does not know', () => {
    for (const msPerItem of [0.001, 0.08, 0.5, 5]) {
      const sizer = new BatchSizer(options);
      for (let i = 0; i < 40; i++) sizer.took(sizer.size * msPerItem);
      const ms = sizer.size * msPerItem;
      if (sizer.size === options.max) expect(ms).toBeLessThan(options.targetMs);
      else if (sizer.size === options.min) expect(ms).toBeGreaterThan(options.targetMs);
      else {
        expect(ms).toBeGreaterThanOrEqual(options.targetMs / 2 - msPerItem);
        expect(ms).toBeLessThanOrEqual(options.targetMs);
      }
    }
  });

  it('stays within its bounds, the first size included', () => {
    const sizer = new BatchSizer({ ...options, initial: 5_000 });
    expect(sizer.size).toBe(1_000);
    sizer.took(0);
    expect(sizer.size).toBe(1_000);
    sizer.took(1_000_000);
    expect(sizer.size).toBe(1);
  });
});
