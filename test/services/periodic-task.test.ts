import { describe, expect, it } from 'vitest';
import { PeriodicTask } from '../../src/support/periodic-task.js';
import { eventually } from '../helpers/eventually.js';

describe('PeriodicTask', () => {
  it('runs one at a time, survives failures, and logs once per run of failures', async () => {
    const lines: string[] = [];
    let runs = 0;
    let running = 0;
    let failing = true;
    const task = new PeriodicTask(
      'pruning',
      5,
      async () => {
        runs++;
        running++;
        expect(running).toBe(1);
        await new Promise((resolve) => setTimeout(resolve, 15));
        running--;
        if (failing) throw new Error('database away');
      },
      { warn: (_object, message) => lines.push(message) },
    );
    task.start();
    await eventually(() => runs >= 4);
    expect(lines).toEqual(['pruning failed; will retry']);
    failing = false;
    await eventually(() => runs >= 7);
    failing = true;
    await eventually(() => runs >= 10);
    await task.stop();
    const stoppedAt = runs;
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(runs).toBe(stoppedAt);
    expect(lines).toEqual(['pruning failed; will retry', 'pruning failed; will retry']);
  });
});
