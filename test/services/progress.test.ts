import { describe, expect, it } from 'vitest';
import { Progress } from '../../src/support/progress.js';

const output = (isTTY: boolean) => {
  const written: string[] = [];
  return { written, isTTY, write: (text: string) => written.push(text) };
};

describe('the progress of a long command', () => {
  it('draws a bar in place on a terminal, then its last line', () => {
    const out = output(true);
    let clock = 1_000;
    const progress = new Progress(out, 'importing', 1000, 'rows', () => clock);
    progress.update(500, 4000);
    clock += 99;
    progress.update(600, 4800); // within the redraw interval: not drawn
    clock += 1;
    progress.update(700, 5600);
    clock += 1_900;
    progress.done(8000);
    expect(out.written[0]).toBe(`\rimporting [${'#'.repeat(15)}${'-'.repeat(15)}]  50% 4,000 rows`);
    expect(out.written[1]).toBe(`\rimporting [${'#'.repeat(21)}${'-'.repeat(9)}]  70% 5,600 rows`);
    expect(out.written).toHaveLength(3);
    expect(out.written[2]).toMatch(
      /^\rimporting: 100% \(8,000 rows in 2\.0 s, 4,000 rows\/s, CPU [\d.]+ s\)\x1b\[K\n$/,
    );
  });

  it('writes a plain line each tenth of the way elsewhere', () => {
    const out = output(false);
    const progress = new Progress(out, 'exporting', 100, 'links');
    for (let done = 1; done <= 100; done++) progress.update(done, done);
    progress.done(100);
    expect(out.written.slice(0, -1)).toEqual(
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((tenth) => `exporting: ${tenth * 10}% (${Math.max(tenth * 10, 1)} links)\n`),
    );
    expect(out.written.at(-1)).toMatch(/^exporting: 100% \(100 links in /);
    expect(out.written.join('')).not.toContain('\r');
  });
});
