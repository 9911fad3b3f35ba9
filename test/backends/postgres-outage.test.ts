/**
 * PostgreSQL connections that come and go. Dropped connections (what a restart, a failover or
 * an idle reaper does: `pg_terminate_backend` here, on the shared server, only this test's
 * connections) under concurrent load against started processes of the built service: no process
 * exits, requests in flight answer 503 `{detail}` or succeed, new requests succeed at once, and
 * every acknowledged write is stored. A database that is down or unreachable (a proxy the test
 * cuts) answers 503 within the connection deadline, readiness says so, and service resumes.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compose, type Service } from '../../src/composition/compose.js';
import { postgres, type TestDatabase, testConfig } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, newMapping, postShorten } from '../helpers/http.js';
import { terminateConnections } from '../helpers/outbox-census.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { postgresBehindProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { type Answer, send } from '../helpers/http-client.js';

const UNAVAILABLE = JSON.stringify({ detail: 'Database unavailable' });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function storedCodes(databaseUrl: string): Promise<Set<string>> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ code: string }>('SELECT code FROM url_mappings');
    return new Set(rows.map((row) => row.code));
  } finally {
    await client.end();
  }
}

describe.skipIf(!postgres.available)('PostgreSQL dropping the service’s connections under load', () => {
  let database: TestDatabase;
  let api: ServerProcess;
  let worker: ServerProcess;
  const applicationName = `urlshortener_${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    database = await postgres.create();
    const url = new URL(database.databaseUrl);
    url.searchParams.set('application_name', applicationName);
    const env = { DATABASE_URL: url.toString(), RATE_LIMIT_ENABLED: 'false' };
    api = await startServer(env, ['serve', '--role', 'api']);
    worker = await startServer(env, ['serve', '--role', 'worker']);
  }, 60_000);
  afterAll(async () => {
    await api?.stop();
    await worker?.stop();
    await database?.drop();
  });

  it('keeps both processes up; in-flight requests answer 201 or 503; every acknowledged write is stored', async () => {
    const nextCode = codeMaker('pgx');
    const answers: (Answer & { at: number })[] = [];
    const acknowledged: string[] = [];
    let stop = false;
    // 100 clients, each one request at a time, for as long as the faults last.
    const client = async () => {
      while (!stop) {
        const body = newMapping(nextCode);
        const answer = await send(api.url, 'POST', '/shorten', { body });
        answers.push({ ...answer, at: performance.now() });
        if (answer.status === 201) acknowledged.push(body.code);
      }
    };
    const load = Promise.all(Array.from({ length: 100 }, client));
    const ended: number[] = [];
    for (let round = 0; round < 3; round++) {
      await sleep(700);
      ended.push(await terminateConnections(applicationName));
    }
    const lastFault = performance.now();
    // Recovery: the first write acknowledged after the last fault.
    await eventually(
      async () => (await send(api.url, 'POST', '/shorten', { body: newMapping(nextCode) })).status === 201,
      { timeoutMs: 5000, intervalMs: 20 },
    );
    const recovered = performance.now() - lastFault;
    await sleep(300);
    stop = true;
    await load;

    expect(ended.reduce((a, b) => a + b, 0)).toBeGreaterThan(3);
    const statuses = new Map<number, number>();
    for (const answer of answers) statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
    expect([...statuses.keys()].filter((status) => status !== 201 && status !== 503)).toEqual([]);
    for (const answer of answers.filter((a) => a.status === 503)) expect(answer.text).toBe(UNAVAILABLE);
    expect(api.child.exitCode).toBeNull();
    expect(worker.child.exitCode).toBeNull();

    const stored = await storedCodes(database.databaseUrl);
    expect(acknowledged.filter((code) => !stored.has(code))).toEqual([]);
    const ready = await send(api.url, 'GET', '/health/ready');
    expect(ready.status).toBe(200);
    expect((await send(worker.url, 'GET', '/health/ready')).status).toBe(200);
    const failuresEnd = Math.max(lastFault, ...answers.filter((a) => a.status === 503).map((a) => a.at)) - lastFault;
    const latencies = answers.map((a) => a.ms).sort((x, y) => x - y);
    console.info(
      `pg_terminate_backend x3 (${ended.join('+')} connections) under 100 concurrent writers: ` +
        `${JSON.stringify(Object.fromEntries(statuses))}, acknowledged ${acknowledged.length}, all stored; ` +
        `last 503 answered ${failuresEnd.toFixed(0)} ms after the last fault, a new write acknowledged ` +
        `${recovered.toFixed(0)} ms after it; answer latency median ${latencies[latencies.length >> 1]!.toFixed(0)} ms, ` +
        `max ${latencies.at(-1)!.toFixed(0)} ms`,
    );
    expect(api.output()).not.toMatch(/Unhandled|uncaught/i);
  });
});

describe.skipIf(!postgres.available)('PostgreSQL down or unreachable', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let service: Service;
  const nextCode = codeMaker('pgd');

  beforeAll(async () => {
    database = await postgres.create();
    const behind = await postgresBehindProxy(database.databaseUrl);
    proxy = behind.proxy;
    service = await compose(testConfig(behind.url, { DB_CONNECT_TIMEOUT_MS: '500', EVENT_POLL_MS: '100' }), {
      logger: false,
    });
    await service.app.ready();
  });
  afterAll(async () => {
    await proxy?.pass();
    await service?.close();
    await proxy?.close();
    await database?.drop();
  });

  const write = async () => {
    const start = performance.now();
    const response = await postShorten(service.app, newMapping(nextCode));
    return { status: response.statusCode, body: response.body, ms: performance.now() - start };
  };
  const readiness = () => service.app.inject({ method: 'GET', url: '/health/ready' });

  it('answers 503 at once while the server refuses connections, says so in readiness, and resumes', async () => {
    expect((await write()).status).toBe(201);
    await proxy.refuse();
    const down = await Promise.all(Array.from({ length: 20 }, write));
    for (const answer of down) {
      expect(answer.status, answer.body).toBe(503);
      expect(answer.body).toBe(UNAVAILABLE);
      expect(answer.ms).toBeLessThan(2000);
    }
    const ready = await readiness();
    expect(ready.statusCode).toBe(503);
    expect(ready.json().checks.database).toBe('unavailable');

    await proxy.pass();
    await eventually(async () => (await write()).status === 201, { timeoutMs: 5000 });
    expect((await readiness()).statusCode).toBe(200);
  });

  it('answers 503 within the connection deadline while the server is unreachable, and resumes', async () => {
    await proxy.blackhole();
    const down = await Promise.all(Array.from({ length: 20 }, write));
    for (const answer of down) {
      expect(answer.status, answer.body).toBe(503);
      expect(answer.ms).toBeLessThan(2000); // DB_CONNECT_TIMEOUT_MS=500, plus a pool queue
    }
    expect((await readiness()).statusCode).toBe(503);
    await proxy.pass();
    await eventually(async () => (await write()).status === 201, { timeoutMs: 5000 });
  });
});
