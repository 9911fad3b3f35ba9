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
import { CENSUS_ENV, census, createdInLog, terminateConnections } from '../helpers/outbox-census.js';
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
    expect(await lostConnections(api.url, 'broken')).toBeGreaterThan(0);
    expect(await lostConnections(api.url, 'unanswered')).toBe(0);
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

/** `db_connections_lost_total{cause}` of the process at `url`. */
async function lostConnections(url: string, cause: 'broken' | 'unanswered'): Promise<number> {
  const { text } = await send(url, 'GET', '/metrics');
  const line = text.split('\n').find((l) => l.startsWith(`db_connections_lost_total{cause="${cause}"} `));
  return Number(line?.split(' ').at(-1) ?? Number.NaN);
}

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

/**
 * The connections' path cut without either side hearing of it: a NAT or firewall that dropped
 * their state (`cutOpen`: new connections pass), then a network split (`partition`: nothing passes,
 * new connections hang). Nothing tells node's sockets, which would wait about 15 minutes for the
 * kernel to give up; DB_UNANSWERED_CHECK_MS gives up such a connection after a look-up.
 */
describe.skipIf(!postgres.available)(
  'PostgreSQL connections cut silently under concurrent writers on two processes',
  () => {
    let database: TestDatabase;
    let proxy: TcpProxy;
    let servers: ServerProcess[];

    beforeAll(async () => {
      database = await postgres.create();
      const behind = await postgresBehindProxy(database.databaseUrl);
      proxy = behind.proxy;
      const env = {
        ...CENSUS_ENV,
        DATABASE_URL: behind.url,
        DB_UNANSWERED_CHECK_MS: '1000',
        DB_CONNECT_TIMEOUT_MS: '1000',
      };
      servers = await Promise.all([startServer(env), startServer(env)]);
    }, 60_000);
    afterAll(async () => {
      await Promise.all((servers ?? []).map((server) => server.stop()));
      await proxy?.close();
      await database?.drop();
    });

    it('answers every request (201, or 503 within seconds), stores every acknowledged mapping and its event once, and resumes', async () => {
      const prefix = `c${randomBytes(2).toString('hex').slice(0, 3)}`;
      let next = 0;
      let stop = false;
      const acknowledged: string[] = [];
      const statuses = new Map<string, number>();
      const unexpected: string[] = [];
      let slowest = 0;
      // 40 clients on each process, one request at a time each (send gives up after 15 s: a request
      // that waits for the kernel fails the test).
      const client = async (server: ServerProcess) => {
        while (!stop) {
          const code = `${prefix}${String(next++).padStart(5, '0')}`;
          const answer = await send(server.url, 'POST', '/shorten', {
            body: { code, url: `https://example.com/${code}`, created_at: '2024-01-01T00:00:00Z', click_count: 0 },
          }).catch((error: unknown) => ({ status: 0, text: String(error), ms: 15_000 }));
          slowest = Math.max(slowest, answer.ms);
          statuses.set(String(answer.status), (statuses.get(String(answer.status)) ?? 0) + 1);
          if (answer.status === 201) acknowledged.push(code);
          else if (answer.text !== UNAVAILABLE) unexpected.push(answer.text);
        }
      };
      const load = Promise.all(servers.flatMap((server) => Array.from({ length: 40 }, () => client(server))));
      for (let round = 0; round < 3; round++) {
        await sleep(1500);
        await proxy.cutOpen();
      }
      await sleep(1500);
      await proxy.partition();
      await sleep(2500);
      await proxy.pass();
      // Each process acknowledges a new write again.
      const fresh = codeMaker('cut');
      for (const server of servers) {
        await eventually(
          async () => (await send(server.url, 'POST', '/shorten', { body: newMapping(fresh) })).status === 201,
          { timeoutMs: 10_000, intervalMs: 100 },
        );
      }
      stop = true;
      await load;

      const logs = servers.map((server) => server.output()).join('\n');
      expect(
        [...statuses.keys()].filter((status) => status !== '201' && status !== '503'),
        logs,
      ).toEqual([]);
      expect(unexpected).toEqual([]);
      expect(statuses.get('503') ?? 0, 'the cuts were felt').toBeGreaterThan(0);
      for (const server of servers) expect(server.child.exitCode).toBeNull();
      const stored = await storedCodes(database.databaseUrl);
      expect(acknowledged.filter((code) => !stored.has(code))).toEqual([]);
      const events = census(acknowledged, await createdInLog(database.databaseUrl));
      expect(events.missing).toEqual([]);
      expect(events.duplicated).toEqual([]);
      // Counted one by one in the metrics (the log says so at most once every few seconds).
      const givenUp = await Promise.all(servers.map((server) => lostConnections(server.url, 'unanswered')));
      expect(Math.min(...givenUp), 'each process gave up connections cut under it').toBeGreaterThan(0);
      expect(servers.every((server) => /went unanswered/.test(server.output()))).toBe(true);
      console.info(
        `3 silent cuts and a 2.5 s split under 80 writers on 2 processes: ${JSON.stringify(Object.fromEntries(statuses))}, ` +
          `acknowledged ${acknowledged.length}, all stored with one event each; slowest answer ${slowest.toFixed(0)} ms; ` +
          `connections given up per process ${givenUp.join(', ')}`,
      );
      for (const server of servers) expect(server.output()).not.toMatch(/Unhandled|uncaught/i);
    }, 90_000);
  },
);
