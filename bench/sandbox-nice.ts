/**
 * `node --import tsx bench/sandbox-nice.ts [ROUNDS]`: what scripts running in a process (role
 * `all`) cost its redirects, with the sandbox threads at `SANDBOX_NICE=0` and at the default 10.
 * One service per run, on a new SQLite file, pinned with all its threads to one core (the last),
 * wrk on core 0 (`-t1 -c32`, 5 s after a 5 s warm-up) on one stored code; rate limiting off (one
 * client address would be refused). Three targets a round, in turn: no scripts, two endless
 * scripts (`while (true) {}`, resubmitted as they time out) at nice 0, the same at nice 10. Prints
 * each run and the medians' ratios to "no scripts". Needs `npm run build`, wrk and taskset.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './lib/processes.js';

const ROUNDS = Number(process.argv[2] ?? 3);
const SERVICE_CORE = String(availableParallelism() - 1);
const ADMIN = { username: 'niceadmin', email: 'nice@example.com', password: 'nice admin password 1' };
const CODE = 'nicebench1';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Service {
  readonly child: ChildProcess;
  readonly url: string;
  readonly dir: string;
}

async function start(nice: number): Promise<Service> {
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-nice-'));
  const child = spawn(
    'taskset',
    ['-c', SERVICE_CORE, process.execPath, '--import', './dist/instrumentation.js', 'dist/cli.js', 'serve'],
    {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        HOST: '127.0.0.1',
        PORT: '0',
        LOG_LEVEL: 'info',
        DATABASE_URL: `sqlite://${dir}/db.sqlite`,
        SANDBOX_NICE: String(nice),
        EXECUTION_CONCURRENCY: '2',
        EXECUTION_MAX_THREADS_PER_USER: '2',
        RATE_LIMIT_ENABLED: 'false',
        ADMIN_USERNAME: ADMIN.username,
        ADMIN_EMAIL: ADMIN.email,
        ADMIN_PASSWORD: ADMIN.password,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening at (http:\/\/[\d.:]+)/.exec(output);
      if (match) resolve(match[1]!);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', () => reject(new Error(`the service exited:\n${output}`)));
  });
  return { child, url, dir };
}

async function login(url: string): Promise<Record<string, string>> {
  const response = await fetch(`${url}/api/v1/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: ADMIN.username, password: ADMIN.password }),
  });
  const cookies = response.headers.getSetCookie().map((cookie) => cookie.split(';')[0]!);
  const csrf = cookies.find((cookie) => cookie.startsWith('csrf_token='))!.split('=')[1]!;
  return { cookie: cookies.join('; '), 'x-csrf-token': csrf };
}

/** Keeps two endless scripts running until `stop.done`: a new one as soon as the pending limit allows. */
async function keepScriptsRunning(url: string, session: Record<string, string>, stop: { done: boolean }) {
  while (!stop.done) {
    const response = await fetch(`${url}/execute`, {
      method: 'POST',
      headers: { ...session, 'content-type': 'application/json' },
      body: JSON.stringify({ language: 'javascript', script: 'while (true) {}', timeout_ms: 10_000 }),
    });
    await response.text();
    await sleep(response.status === 202 ? 100 : 500);
  }
}

function wrk(url: string): { rps: number; p99: string } {
  const out = execFileSync('taskset', ['-c', '0', 'wrk', '-t1', '-c32', '-d5s', '--latency', `${url}/${CODE}`], {
    encoding: 'utf8',
  });
  return { rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)![1]), p99: /99%\s+(\S+)/.exec(out)![1]! };
}

async function run(nice: number, scripts: boolean): Promise<{ rps: number; p99: string }> {
  const service = await start(nice);
  const stop = { done: false };
  let loop: Promise<void> | undefined;
  try {
    const created = await fetch(`${service.url}/shorten`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        code: CODE,
        url: 'https://example.com/x',
        created_at: new Date().toISOString(),
        click_count: 0,
      }),
    });
    if (created.status !== 201) throw new Error(`create: ${created.status} ${await created.text()}`);
    if (scripts) {
      loop = keepScriptsRunning(service.url, await login(service.url), stop);
      await sleep(1500);
    }
    wrk(service.url); // warm-up
    return wrk(service.url);
  } finally {
    stop.done = true;
    await loop;
    service.child.kill('SIGKILL');
    rmSync(service.dir, { recursive: true, force: true });
  }
}

const TARGETS = [
  { name: 'no scripts', nice: 10, scripts: false },
  { name: 'scripts at nice 0', nice: 0, scripts: true },
  { name: 'scripts at nice 10', nice: 10, scripts: true },
] as const;

async function main(): Promise<void> {
  const results = new Map<string, number[]>(TARGETS.map((t) => [t.name, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const target of TARGETS) {
      const measured = await run(target.nice, target.scripts);
      results.get(target.name)!.push(measured.rps);
      console.log(`round ${round}: ${target.name}: ${measured.rps.toFixed(0)} req/s, p99 ${measured.p99}`);
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const reference = median(results.get('no scripts')!);
  for (const [name, values] of results) {
    console.log(
      `${name}: median ${median(values).toFixed(0)} req/s, ${(median(values) / reference).toFixed(2)} x no scripts`,
    );
  }
}

await main();
