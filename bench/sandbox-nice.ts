/**
 * `node --import tsx bench/sandbox-nice.ts [ROUNDS]`: what scripts running in a process (role
 * `all`) cost its redirects, with the sandbox threads at `SANDBOX_NICE=0` and at the default 10.
 * One service per run, started as `npm start` starts it on a new SQLite file, with all its threads
 * on the bench's target cores (core 1 of 2), wrk on the generator cores (the bench's `runWrk` and
 * popular-codes script, 32 connections, 5 s after a 5 s warm-up, any answer but a 302 an error) on
 * one stored code; rate limiting off (one client address would be refused). Each round
 * measures the generator's ceiling first (nginx, or its node:net stand-in: bench/lib/ceiling.ts)
 * with the same wrk command, then three targets in turn: no scripts, two endless scripts
 * (`while (true) {}`, resubmitted as they time out) at nice 0, the same at nice 10. Prints each
 * run and the medians' ratios to "no scripts", which is marked GENERATOR-BOUND when it reaches
 * 85 % of the ceiling. Needs `npm run build`; says what else is missing (wrk, taskset, nginx).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCeiling } from './lib/ceiling.js';
import { GENERATOR_BOUND_FRACTION } from './lib/checks.js';
import { cleanUpAll, cleanUpOnSignals } from './lib/cleanup.js';
import { node, startServer } from './lib/processes.js';
import { loadSettings } from './lib/settings.js';
import { median } from './lib/stats.js';
import { SERVICE_ARGS } from './lib/targets.js';
import { findTools } from './lib/tools.js';
import { runWrk } from './lib/wrk.js';

const ROUNDS = Number(process.argv[2] ?? 3);
const ADMIN = { username: 'niceadmin', email: 'nice@example.com', password: 'nice admin password 1' };
const CODE = 'nicebench1';
const settings = loadSettings();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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

/**
 * Warms `url` up (every answer's status counted), then measures it: the bench's wrk run
 * (`runWrk`, its popular-codes script over the one stored code, pinned to the generator's cores).
 * Any socket error or answer other than the 302 fails the run: a refused request is no redirect.
 */
async function measure(url: string, paths: string): Promise<{ rps: number; p99Ms: number }> {
  const wrk = (countStatuses: boolean) =>
    runWrk({
      url,
      script: 'popular.lua',
      args: [paths],
      durationS: 5,
      connections: 32,
      cores: settings.generatorCores,
      countStatuses,
      expectedStatus: 302,
    });
  const warm = await wrk(true);
  const measured = await wrk(false);
  for (const [run, m] of [
    ['warm-up', warm],
    ['run', measured],
  ] as const) {
    if (m.unexpected > 0)
      throw new Error(
        `${url}: ${m.unexpected} unexpected answers in the ${run} (${JSON.stringify(m.statuses)}, ${JSON.stringify(m.errors)})`,
      );
  }
  return { rps: measured.rps, p99Ms: measured.p99Ms };
}

async function run(
  dir: string,
  paths: string,
  nice: number,
  scripts: boolean,
): Promise<{ rps: number; p99Ms: number }> {
  const data = mkdtempSync(join(dir, 'service-'));
  const service = await startServer(`nice-${nice}`, node(SERVICE_ARGS, settings.targetCores), {
    LOG_LEVEL: 'warn',
    DATABASE_URL: `sqlite://${data}/db.sqlite`,
    SANDBOX_NICE: String(nice),
    EXECUTION_CONCURRENCY: '2',
    EXECUTION_MAX_THREADS_PER_USER: '2',
    RATE_LIMIT_ENABLED: 'false',
    ADMIN_USERNAME: ADMIN.username,
    ADMIN_EMAIL: ADMIN.email,
    ADMIN_PASSWORD: ADMIN.password,
  });
  const stop = { done: false };
  let loop: Promise<void> | undefined;
  try {
    const created = await fetch(`${service.baseUrl}/shorten`, {
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
      loop = keepScriptsRunning(service.baseUrl, await login(service.baseUrl), stop);
      await sleep(1500);
    }
    return await measure(service.baseUrl, paths);
  } finally {
    stop.done = true;
    await loop;
    await service.stop();
    rmSync(data, { recursive: true, force: true });
  }
}

const TARGETS = [
  { name: 'no scripts', nice: 10, scripts: false },
  { name: 'scripts at nice 0', nice: 0, scripts: true },
  { name: 'scripts at nice 10', nice: 10, scripts: true },
] as const;

async function main(): Promise<void> {
  const { nginx } = findTools(settings.generatorCores.length > 0);
  const dir = mkdtempSync(join(tmpdir(), 'urlshortener-sandbox-nice-'));
  const paths = join(dir, 'paths.txt');
  writeFileSync(paths, `/${CODE}\n`);
  const { server: ceiling, kind } = await startCeiling(nginx, dir, settings.targetCores);
  const ceilings: number[] = [];
  const results = new Map<string, number[]>(TARGETS.map((t) => [t.name, []]));
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      const reached = await measure(ceiling.baseUrl, paths);
      ceilings.push(reached.rps);
      console.log(`round ${round}: generator ceiling (${kind}): ${reached.rps.toFixed(0)} req/s`);
      for (const target of TARGETS) {
        const measured = await run(dir, paths, target.nice, target.scripts);
        results.get(target.name)!.push(measured.rps);
        console.log(
          `round ${round}: ${target.name}: ${measured.rps.toFixed(0)} req/s, p99 ${measured.p99Ms.toFixed(2)} ms`,
        );
      }
    }
  } finally {
    await ceiling.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const reference = median(results.get('no scripts')!);
  const share = reference / median(ceilings);
  const bound = share >= GENERATOR_BOUND_FRACTION ? ' GENERATOR-BOUND: the ratios below may flatter the scripts' : '';
  console.log(`no scripts at ${(share * 100).toFixed(0)} % of the generator's ceiling${bound}`);
  for (const [name, values] of results) {
    console.log(
      `${name}: median ${median(values).toFixed(0)} req/s, ${(median(values) / reference).toFixed(2)} x no scripts`,
    );
  }
}

cleanUpOnSignals();
try {
  await main();
} finally {
  await cleanUpAll();
}
