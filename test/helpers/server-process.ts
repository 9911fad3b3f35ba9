import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');

/** The built service (`npm run build` runs before `npm test`), started the way `npm start` starts it. */
export interface ServerProcess {
  readonly url: string;
  readonly child: ChildProcess;
  readonly output: () => string;
  /** Sends `signal` and resolves with the exit code once the process has gone. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export function nodeArgs(): string[] {
  const instrumentation = join(ROOT, 'dist', 'instrumentation.js');
  return existsSync(instrumentation) ? ['--import', instrumentation] : [];
}

export async function startServer(env: Record<string, string>, args: string[] = ['serve']): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...nodeArgs(), join(ROOT, 'dist', 'cli.js'), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    // Generous: two passes of the suite on 2 loaded cores once took a start past 20 s.
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${output}`));
    });
  });
  return {
    url,
    child,
    output: () => output,
    stop: (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Runs the CLI to completion and returns its exit code and output. */
export function runCli(args: string[], env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(ROOT, 'dist', 'cli.js'), ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.once('exit', (code) => resolve({ code, output }));
  });
}

/** An administrator the service creates at start from ADMIN_USERNAME, ADMIN_EMAIL and ADMIN_PASSWORD. */
export interface StartAdmin {
  readonly username: string;
  readonly email: string;
  readonly password: string;
}

/**
 * Two processes of the built service on one database (`env` names it), with `admin` from the
 * environment: started one after the other, so that the first creates the administrator and the
 * second finds it.
 */
export async function startAdministeredPair(env: Record<string, string>, admin: StartAdmin): Promise<ServerProcess[]> {
  const withAdmin = {
    ...env,
    ADMIN_USERNAME: admin.username,
    ADMIN_EMAIL: admin.email,
    ADMIN_PASSWORD: admin.password,
  };
  const first = await startServer(withAdmin);
  try {
    return [first, await startServer(withAdmin)];
  } catch (error) {
    await first.stop('SIGKILL'); // the caller never got it to stop: it would outlive the run
    throw error;
  }
}
