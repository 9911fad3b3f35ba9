import { afterAll, describe, expect, it } from 'vitest';
import { QuickJsSandbox } from '../../src/adapters/sandbox/quickjs-sandbox.js';
import type { Sandbox, SandboxLimits } from '../../src/ports/sandbox.js';
import { threadNices } from '../helpers/thread-nice.js';

// A deadline far off where the deadline is not what a case tests (those give their own): in a
// loaded CI rehearsal 10,000 console.log calls took the thread past 1 s of wall time. It is the
// memory cap, too, that must end a bomb, not a loaded machine's deadline.
const LIMITS: SandboxLimits = { timeoutMs: 10_000, memoryBytes: 32 * 1024 * 1024, outputBytes: 64 * 1024 };

/** One contract, every sandbox adapter (QuickJS in WebAssembly is the one there is). */
describe.each([{ name: 'quickjs', make: (concurrency?: number): Sandbox => new QuickJsSandbox(concurrency) }])(
  'Sandbox on $name',
  ({ make }) => {
    const sandbox = make();
    afterAll(() => sandbox.close());

    it('returns the console output and the completion value', async () => {
      const run = await sandbox.run(
        'console.log("hello", 1, {a: 2}); console.error("oops"); [1, 2].map(x => x * 21)',
        LIMITS,
      );
      expect(run).toMatchObject({
        status: 'completed',
        output: 'hello 1 {"a":2}\noops\n',
        result: [21, 42],
        error: null,
      });
      expect(run.durationMs).toBeGreaterThanOrEqual(0);
    });

    it('settles an async script', async () => {
      const run = await sandbox.run('(async () => { await null; console.log("later"); return "done"; })()', LIMITS);
      expect(run).toMatchObject({ status: 'completed', output: 'later\n', result: 'done' });
    });

    it('reports a thrown error as failed', async () => {
      const run = await sandbox.run('throw new TypeError("bad input")', LIMITS);
      expect(run).toMatchObject({ status: 'failed', error: 'TypeError: bad input', result: null });
    });

    it('reports a syntax error as failed', async () => {
      expect(await sandbox.run('let = ;', LIMITS)).toMatchObject({
        status: 'failed',
        error: expect.stringMatching(/SyntaxError/),
      });
    });

    it('ends an endless loop as timed_out within its deadline plus a margin', async () => {
      const run = await sandbox.run('while (true) {}', { ...LIMITS, timeoutMs: 300 });
      expect(run.status).toBe('timed_out');
      expect(run.durationMs).toBeLessThan(300 + 1500);
    });

    it('ends a memory bomb as failed', async () => {
      const run = await sandbox.run('const a = []; while (true) a.push("x".repeat(1 << 16));', LIMITS);
      expect(run.status).toBe('failed');
      expect(run.error).toMatch(/memory/i);
    });

    it('ends a memory bomb of large arrays (which QuickJS alone does not count) as failed', async () => {
      const run = await sandbox.run('const a = []; for (let i = 0; ; i++) a.push(new Array(10000).fill(i));', LIMITS);
      expect(run).toMatchObject({ status: 'failed', error: 'Memory limit exceeded' });
    });

    it('ends one huge allocation as failed', async () => {
      expect((await sandbox.run('new Array(2e8).fill(1).length', LIMITS)).status).toBe('failed');
    });

    it('ends unbounded recursion as failed', async () => {
      const run = await sandbox.run('function f() { return f() + 1; } f()', LIMITS);
      expect(run.status).toBe('failed');
    });

    it('still runs the next script after all of the above', async () => {
      expect(await sandbox.run('1 + 1', LIMITS)).toMatchObject({ status: 'completed', result: 2 });
    });

    it('offers no network, file system, process or timers of the host', async () => {
      const run = await sandbox.run(
        '[typeof fetch, typeof require, typeof process, typeof XMLHttpRequest, typeof setTimeout, typeof globalThis.os, typeof globalThis.std]',
        LIMITS,
      );
      expect(run.result).toEqual([
        'undefined',
        'undefined',
        'undefined',
        'undefined',
        'undefined',
        'undefined',
        'undefined',
      ]);
    });

    it('cuts console output at the limit', async () => {
      const run = await sandbox.run('for (let i = 0; i < 10000; i++) console.log("0123456789");', {
        ...LIMITS,
        outputBytes: 1000,
      });
      expect(run.status).toBe('completed');
      expect(Buffer.byteLength(run.output)).toBeLessThan(1100);
      expect(run.output).toContain('[output truncated]');
    });

    it('keeps runs apart: nothing one script defines is seen by the next', async () => {
      await sandbox.run('globalThis.leak = 42', LIMITS);
      expect((await sandbox.run('typeof leak', LIMITS)).result).toBe('undefined');
    });

    it('cuts a huge result and a huge error at the output limit, marked as cut', async () => {
      const limits = { ...LIMITS, memoryBytes: 64 * 1024 * 1024, timeoutMs: 5000 };
      const text = await sandbox.run('"p".repeat(30 * 1024 * 1024)', limits);
      expect(text).toMatchObject({ status: 'completed', truncated: true, error: null });
      expect(typeof text.result).toBe('string');
      expect(Buffer.byteLength(text.result as string)).toBeLessThanOrEqual(LIMITS.outputBytes);
      expect(text.result as string).toMatch(/^"p{60000,}\n\[result truncated\]$/); // its JSON text's start

      const value = await sandbox.run('Array.from({ length: 100000 }, (_, i) => ({ i }))', limits);
      expect(value).toMatchObject({ status: 'completed', truncated: true });
      expect(value.result as string).toMatch(/^\[\{"i":0\},\{"i":1\},.*\n\[result truncated\]$/s);
      expect(Buffer.byteLength(value.result as string)).toBeLessThanOrEqual(LIMITS.outputBytes);

      const thrown = await sandbox.run('throw new Error("e".repeat(30 * 1024 * 1024))', limits);
      expect(thrown).toMatchObject({ status: 'failed', truncated: true, result: null });
      expect(thrown.error).toMatch(/^Error: e{60000,}\n\[error truncated\]$/);
      expect(Buffer.byteLength(thrown.error!)).toBeLessThanOrEqual(LIMITS.outputBytes);

      // Multi-byte characters are cut whole.
      const wide = await sandbox.run('"é".repeat(40000)', limits);
      expect(wide.truncated).toBe(true);
      expect(wide.result as string).toMatch(/^"é+\n\[result truncated\]$/);
      expect(await sandbox.run('"p".repeat(1000)', limits)).toMatchObject({
        result: 'p'.repeat(1000),
        truncated: false,
      });
    });

    it('runs as many scripts at once as it has threads: a short one ends while long ones run', async () => {
      const pool = make(3);
      try {
        expect(pool.concurrency).toBe(3);
        const ended: string[] = [];
        const long = [1, 2].map((n) =>
          pool.run('while (true) {}', { ...LIMITS, timeoutMs: 3000 }).then((run) => {
            ended.push(`long${n}`);
            return run;
          }),
        );
        // Its deadline is not what is tested, only that it ends before the long ones' (3 s): with two
        // threads spinning on a 2-core machine under the whole suite, 1 s was once not enough for 1 + 1.
        const short = await pool.run('1 + 1', { ...LIMITS, timeoutMs: 2500 });
        ended.push('short');
        expect(short).toMatchObject({ status: 'completed', result: 2 });
        expect(ended).toEqual(['short']); // both long ones still run
        for (const run of await Promise.all(long)) expect(run.status).toBe('timed_out');
        // A fourth run beyond the three threads waits for one, then runs.
        const runs = await Promise.all([1, 2, 3, 4].map((n) => pool.run(`${n} * 2`, LIMITS)));
        expect(runs.map((r) => r.result)).toEqual([2, 4, 6, 8]);
      } finally {
        await pool.close();
      }
    });
  },
);

/** The QuickJS adapter's own option: its threads' CPU priority (SANDBOX_NICE). */
describe('QuickJsSandbox threads at a nice value', () => {
  it.skipIf(process.platform !== 'linux')(
    "runs its threads at the nice value it is given, and leaves the process's own threads as they are",
    async () => {
      const before = threadNices();
      // 17: a value no other sandbox of this test process runs at (the service's default is 10).
      const pool = new QuickJsSandbox(2, { nice: 17, onWarning: (message) => expect.fail(message) });
      try {
        // Both at once, so that both threads start. A deadline far off: at nice 17 a thread gets a
        // sliver of a core the rest of the suite keeps busy, and 200 ms of work once took it past 1 s
        // (the Node 24 pass of a CI rehearsal). Its deadline is not what is tested here.
        const limits = { ...LIMITS, timeoutMs: 20_000 };
        const runs = await Promise.all(
          [1, 2].map((n) => pool.run(`const end = Date.now() + 200; while (Date.now() < end); ${n}`, limits)),
        );
        expect(runs.map((r) => [r.status, r.result])).toEqual([
          ['completed', 1],
          ['completed', 2],
        ]);
        const after = threadNices();
        const niced = [...after].filter(([tid, nice]) => nice === 17 && !before.has(tid));
        expect(niced).toHaveLength(2);
        for (const [tid, nice] of before) if (after.has(tid)) expect(after.get(tid), `thread ${tid}`).toBe(nice);
      } finally {
        await pool.close();
      }
    },
    40_000,
  );

  it('refuses a nice value outside 0 to 19', () => {
    expect(() => new QuickJsSandbox(1, { nice: 20 })).toThrow(RangeError);
    expect(() => new QuickJsSandbox(1, { nice: -1 })).toThrow(RangeError);
  });
});

/** A thread's start-up is not its first script's time (a new thread took seconds on a loaded CI machine). */
describe('QuickJsSandbox threads that start late', () => {
  it("counts a script's deadline from when its thread begins it, and still ends one that overruns", async () => {
    const pool = new QuickJsSandbox(1, {
      threadProgram: new URL('../fixtures/late-sandbox-thread.mjs', import.meta.url),
    });
    try {
      const started = performance.now();
      const run = await pool.run('1 + 1', { ...LIMITS, timeoutMs: 300 });
      expect(run).toMatchObject({ status: 'completed', result: 2, error: null });
      // Begun 2.5 s after it was handed over: past the deadline and the watchdog's 1 s margin.
      expect(performance.now() - started).toBeGreaterThan(2_500);
      const endless = await pool.run('while (true) {}', { ...LIMITS, timeoutMs: 300 });
      expect(endless).toMatchObject({ status: 'timed_out', result: null });
    } finally {
      await pool.close();
    }
  }, 30_000);
});
