/**
 * `retainTickShapes`: after full garbage collections with `process.nextTick`'s queue empty, a new
 * queue entry is still made with the map of the entries it keeps (V8's own `%HaveSameMap`, in a
 * child process started with `--allow-natives-syntax --expose-gc`).
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const MODULE = fileURLToPath(new URL('../../src/support/tick-shapes.ts', import.meta.url));

const CHILD = `
const { createHook } = await import('node:async_hooks');
const { retainTickShapes, retainedTickShapes } = await import(${JSON.stringify(MODULE)});
const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)');
const drained = () => new Promise((resolve) => setImmediate(resolve));
function newEntry() {
  let entry;
  const hook = createHook({ init(_id, type, _trigger, resource) { if (type === 'TickObject') entry = resource; } });
  hook.enable();
  process.nextTick(() => {});
  hook.disable();
  return entry;
}
retainTickShapes();
retainTickShapes(); // a second call keeps nothing more
const kept = retainedTickShapes();
const same = [];
for (let i = 0; i < 5; i++) {
  await drained(); // no entry alive but the kept ones
  globalThis.gc();
  globalThis.gc();
  same.push(kept.every((entry) => sameMap(entry, newEntry())));
}
console.log(JSON.stringify({ kept: kept.length, same }));
`;

describe('retainTickShapes', () => {
  it("keeps nextTick's entry map alive through full collections", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--allow-natives-syntax', '--expose-gc', '--import', 'tsx', '--input-type=module', '-e', CHILD],
      { timeout: 30_000 },
    );
    const result = JSON.parse(stdout.trim()) as { kept: number; same: boolean[] };
    expect(result.kept).toBe(2);
    expect(result.same).toEqual([true, true, true, true, true]);
  });
});
