/**
 * Executions that scale and stay fair (issue #11), in one process (role `all`) on each database:
 * a worker runs as many scripts at once as it has sandbox threads, so a short script ends while
 * long ones run; the threads go to users in turn, so one user's queue of long scripts does not
 * make another user's short one wait for all of it, and with the default cap one user never takes
 * every thread; an execution waiting for a thread stays `queued` (no `started_at`) until one
 * picks it up, and only then becomes `running`.
 */
import { describe, expect, it } from 'vitest';
import { type TestApp, useTestApp } from '../helpers/app.js';
import type { Session } from '../helpers/auth.js';
import { BACKENDS } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { type ExecutionBody, ENDLESS, finished, read, reaches, submit } from './execution-client.js';

const BASE_ENV = { EVENT_POLL_MS: '50', EVENT_LEASE_MS: '2000', SANDBOX_MEMORY_MB: '32' };
/** Long enough for the short scripts to come and go while the long ones run. */
const LONG_MS = 4000;

/** The executions `ids`, once `count` of them run (which ones is up to the worker), split by status. */
async function whenRunning(t: TestApp, session: Session, ids: readonly string[], count: number) {
  return eventually(
    async () => {
      const all = await Promise.all(ids.map((id) => read(t.app, session, id)));
      const running = all.filter((e) => e.status === 'running');
      if (running.length < count) throw new Error(`${running.length} of ${count} running`);
      return { running, waiting: all.filter((e) => e.status === 'queued') };
    },
    { timeoutMs: 20_000, intervalMs: 50 },
  );
}

const ids = (executions: readonly ExecutionBody[]) => executions.map((e) => e.id);

describe.each(BACKENDS)('executions on $name', (backend) => {
  describe('three threads, one user may hold all three', () => {
    const t = useTestApp(
      backend,
      { ...BASE_ENV, EXECUTION_CONCURRENCY: '3', EXECUTION_MAX_THREADS_PER_USER: '3' },
      { accounts: true },
    );
    const alice = t.user('exp');

    it.skipIf(!backend.available)('a short script ends while two long ones still run beside it', async () => {
      const long = [await submit(t.app, alice, ENDLESS, LONG_MS), await submit(t.app, alice, ENDLESS, LONG_MS)];
      for (const id of long) await reaches(t.app, alice, id, 'running');
      const short = await submit(t.app, alice, '1 + 1');
      expect(await finished(t.app, alice, short)).toMatchObject({ status: 'completed', result: 2 });
      for (const id of long) expect((await read(t.app, alice, id)).status).toBe('running');
      for (const id of long) expect((await finished(t.app, alice, id)).status).toBe('timed_out');
    });
  });

  describe('two threads, one user may hold both: free threads go to users in turn', () => {
    const t = useTestApp(
      backend,
      { ...BASE_ENV, EXECUTION_CONCURRENCY: '2', EXECUTION_MAX_THREADS_PER_USER: '2' },
      { accounts: true },
    );
    const alice = t.user('exa');
    const bob = t.user('exb');

    it.skipIf(!backend.available)(
      "another user's short script runs on the next free thread, before the first user's queue drains; waiting ones stay queued",
      async () => {
        const long: string[] = [];
        for (let i = 0; i < 4; i++) long.push(await submit(t.app, alice, ENDLESS, LONG_MS));
        // The pool is full: the other two wait, queued, not started.
        const { running, waiting } = await whenRunning(t, alice, long, 2);
        expect(waiting).toHaveLength(2);
        for (const execution of waiting) expect(execution.started_at).toBeNull();
        const short = await submit(t.app, bob, '1 + 1');
        expect(await read(t.app, bob, short)).toMatchObject({ status: 'queued', started_at: null });
        const bobs = await finished(t.app, bob, short);
        expect(bobs).toMatchObject({ status: 'completed', result: 2 });
        // And each of Alice's ran in the end, the waiting ones started only when a thread took them.
        const ended = new Map(
          await Promise.all(long.map(async (id) => [id, await finished(t.app, alice, id, 30_000)] as const)),
        );
        for (const execution of ended.values()) expect(execution.status).toBe('timed_out');
        const firstEnd = Math.min(...ids(running).map((id) => Date.parse(ended.get(id)!.finished_at!)));
        // Bob's ran on the first thread that came free, and ended before the last of Alice's started.
        expect(Date.parse(bobs.started_at!)).toBeGreaterThanOrEqual(firstEnd);
        const starts = ids(waiting).map((id) => Date.parse(ended.get(id)!.started_at!));
        expect(Date.parse(bobs.finished_at!)).toBeLessThanOrEqual(Math.max(...starts));
        for (const id of ids(waiting)) expect(Date.parse(ended.get(id)!.started_at!)).toBeGreaterThanOrEqual(firstEnd);
      },
    );
  });

  describe('two threads, the default cap (all but one per user)', () => {
    const t = useTestApp(backend, { ...BASE_ENV, EXECUTION_CONCURRENCY: '2' }, { accounts: true });
    const alice = t.user('exc');
    const bob = t.user('exd');

    it.skipIf(!backend.available)(
      "one user's long scripts hold one thread; another user's short script runs at once on the other",
      async () => {
        const long: string[] = [];
        for (let i = 0; i < 3; i++) long.push(await submit(t.app, alice, ENDLESS, LONG_MS));
        const { running, waiting } = await whenRunning(t, alice, long, 1);
        expect(running).toHaveLength(1);
        expect(waiting).toHaveLength(2);
        for (const execution of waiting) expect(execution.started_at).toBeNull();
        const short = await submit(t.app, bob, '"quick"');
        const bobs = await finished(t.app, bob, short);
        expect(bobs).toMatchObject({ status: 'completed', result: 'quick' });
        const ended: ExecutionBody[] = [];
        for (const id of long) ended.push(await finished(t.app, alice, id, 30_000));
        for (const execution of ended) expect(execution.status).toBe('timed_out');
        // One thread was kept for other users, all along: Alice's ran one at a time, each starting
        // once the one before it had ended, and Bob's did not wait for her queue. (Read from the
        // recorded times, not from a status read while they ran: under CI's load Bob's short
        // script has taken longer than what was left of Alice's first one's 4 s.)
        const alices = ended
          .map((e) => ({ started: Date.parse(e.started_at!), finished: Date.parse(e.finished_at!) }))
          .sort((a, b) => a.started - b.started);
        for (let i = 1; i < alices.length; i++) {
          expect(alices[i]!.started).toBeGreaterThanOrEqual(alices[i - 1]!.finished);
        }
        expect(Date.parse(bobs.started_at!)).toBeLessThan(alices[alices.length - 1]!.started);
      },
    );
  });
});
