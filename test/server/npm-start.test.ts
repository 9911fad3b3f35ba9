/**
 * `npm start`, the documented start command, under a process manager (issue 16): SIGTERM to npm's
 * PID stops the service gracefully (no node process left behind with PPID 1 holding the port), and
 * a start with a current build does not rebuild (`scripts/build.mjs --if-stale`).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript script (it runs before anything is compiled), no types.
import * as buildScript from '../../scripts/build.mjs';
import { eventually } from '../helpers/eventually.js';
import { accepts } from '../helpers/own-server.js';
import { forget, killOnExit } from '../helpers/own-process.js';

const ROOT = join(import.meta.dirname, '..', '..');
const { buildIsCurrent, stamp, INPUTS, OUTPUTS, STAMP } = buildScript as {
  buildIsCurrent(root: string): boolean;
  stamp(root: string, startedMs: number): void;
  INPUTS: string[];
  OUTPUTS: string[];
  STAMP: string;
};
/** When each output and the stamp were last written: a rebuild writes every one of them. */
const writtenAt = () => Object.fromEntries([...OUTPUTS, STAMP].map((p) => [p, statSync(join(ROOT, p)).mtimeMs]));

const dir = mkdtempSync(join(tmpdir(), 'urlshortener-npm-start-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('npm start', () => {
  it('starts without rebuilding a current build, and stops gracefully on SIGTERM to npm', async () => {
    // A stale build would be rebuilt here, under the other test files that use dist/.
    expect(buildIsCurrent(ROOT), 'the build is not current: run `npm run build` (npm test does)').toBe(true);
    const built = writtenAt();
    const npm = spawn('npm', ['start'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? dir,
        HOST: '127.0.0.1',
        PORT: '0',
        LOG_LEVEL: 'info',
        DATABASE_URL: `sqlite:${join(dir, 'npm-start.db')}`,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    killOnExit(npm.pid!);
    let output = '';
    npm.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    npm.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));

    const listening = await eventually(
      () => {
        const line = output.split('\n').find((l) => l.includes('Server listening at'));
        if (!line) throw new Error(`not listening yet:\n${output}`);
        return JSON.parse(line) as { pid: number; msg: string };
      },
      // Generous: its speed is not the subject, and a loaded CI rehearsal once took past 20 s.
      { timeoutMs: 60_000 },
    );
    // npm's child, killed too whatever fails below (SIGKILL to npm would leave it serving).
    const node = listening.pid;
    killOnExit(node);
    expect(output).toContain('the build is current: not rebuilding');
    expect(output).not.toContain('tsc -p');
    // Not one output nor the stamp written again (not a start-up time: tests assert no timings).
    expect(writtenAt(), output).toEqual(built);

    const port = Number(/:(\d+)$/.exec(listening.msg)![1]);
    expect(node).not.toBe(npm.pid);
    expect(await accepts(port)).toBe(true);

    npm.kill('SIGTERM');
    expect(await exited).toBe(0);
    await eventually(() => expect(alive(node), 'the node process is gone with npm').toBe(false), { timeoutMs: 5000 });
    expect(await accepts(port)).toBe(false);
    expect(output).toContain('shut down cleanly');
    forget(npm.pid!);
    forget(node);
  }, 90_000);
});

describe('scripts/build.mjs --if-stale', () => {
  /** A tree with every input and output, built (stamped) at `builtMs`. */
  function tree(builtMs: number): string {
    const root = mkdtempSync(join(dir, 'tree-'));
    for (const path of [...INPUTS.map((p) => (p.includes('.') ? p : `${p}/a.ts`)), ...OUTPUTS]) {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), '');
    }
    const before = (builtMs - 60_000) / 1000;
    for (const path of [...INPUTS, ...INPUTS.filter((p) => !p.includes('.')).map((p) => `${p}/a.ts`)]) {
      utimesSync(join(root, path), before, before);
    }
    stamp(root, builtMs);
    return root;
  }

  it('finds a build current when every input is older than its stamp', () => {
    expect(buildIsCurrent(tree(Date.now()))).toBe(true);
  });

  it.each(INPUTS)('finds it stale once %s changes', (input) => {
    const now = Date.now();
    const root = tree(now - 10_000);
    const path = join(root, input.includes('.') ? input : `${input}/a.ts`);
    utimesSync(path, now / 1000, now / 1000);
    expect(buildIsCurrent(root)).toBe(false);
  });

  it('finds it stale when a source file is deleted (its folder changes) or an output is missing', () => {
    const now = Date.now();
    const deleted = tree(now - 10_000);
    rmSync(join(deleted, 'src', 'a.ts'));
    expect(buildIsCurrent(deleted)).toBe(false);
    for (const output of OUTPUTS) {
      const root = tree(now);
      rmSync(join(root, output));
      expect(buildIsCurrent(root), output).toBe(false);
    }
    expect(buildIsCurrent(join(dir, 'never-built'))).toBe(false);
  });
});
