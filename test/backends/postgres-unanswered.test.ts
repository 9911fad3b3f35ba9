/**
 * Statements sent on a PostgreSQL connection that was cut without either side hearing of it: a NAT
 * or firewall that dropped the connection's state, a network split. Nothing comes back and the
 * socket does not fail until the kernel gives up (about 15 minutes), so without a watch the
 * statement waits that long. DB_UNANSWERED_CHECK_MS looks the connection's session up on a new
 * connection and gives up the connection when the server is unreachable or its session is not
 * running the statement; a slow statement the server runs is left alone. The cuts are a TCP proxy
 * that stops forwarding on the connections open and sends no FIN either way
 * (test/helpers/tcp-proxy.ts); the server is the real one, and at the end a real PgBouncer.
 */
import { sql } from 'kysely';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../src/adapters/storage/connection-errors.js';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import { postgres, type TestDatabase } from '../helpers/backends.js';
import { OwnPgBouncer, pgbouncerBinaryAvailable } from '../helpers/own-pgbouncer.js';
import { POSTGRES_URL } from '../helpers/services.js';
import { postgresBehindProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/** Runs `statement`; resolves with its error (a rejection) or fails the test when it is answered. */
async function failure(statement: Promise<unknown>): Promise<Error> {
  const outcome = await statement.then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(outcome, 'the statement was answered').toBeInstanceOf(Error);
  return outcome as Error;
}

describe.skipIf(!postgres.available)('statements left unanswered on a cut PostgreSQL connection', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let db: Database;
  /** Why each connection was given up, as the service's log hears it. */
  let givenUp: string[];

  const open = async (unansweredCheckMs: number) => {
    database = await postgres.create();
    const behind = await postgresBehindProxy(database.databaseUrl);
    proxy = behind.proxy;
    givenUp = [];
    db = openDatabase(
      { kind: 'postgres', url: behind.url, poolMax: 4, connectTimeoutMs: 1000, unansweredCheckMs },
      { onConnectionLost: (error) => givenUp.push(error.message) },
    );
    await db.ping();
  };
  afterEach(async () => {
    await proxy?.close();
    await db?.close();
    await database?.drop();
  });

  it('leaves a statement the server is running alone, however long it takes', async () => {
    await open(300);
    const before = proxy.forwarded;
    const { rows } = await sql<{ slept: string }>`SELECT pg_sleep(2)::text AS slept`.execute(db.db);
    expect(rows).toEqual([{ slept: '' }]);
    expect(givenUp).toEqual([]);
    // Its session was looked up meanwhile, each time on a connection of its own.
    expect(proxy.forwarded - before).toBeGreaterThanOrEqual(3);
  });

  it('gives up an idle pooled connection whose path was dropped, and the next statement runs on a new one', async () => {
    await open(500);
    await sql`SELECT 1`.execute(db.db); // a pooled connection, idle now
    await proxy.cutOpen();
    const error = await failure(sql`SELECT 2`.execute(db.db));
    expect(isDatabaseUnavailable(error), error.message).toBe(true); // answered 503 by the service
    expect(givenUp).toHaveLength(1);
    expect(givenUp[0]).toMatch(/went unanswered for \d+ ms and its session \(\d+\) has not been running it .*\(idle\)/);
    expect((await sql<{ n: number }>`SELECT 3 AS n`.execute(db.db)).rows).toEqual([{ n: 3 }]);
  });

  it('gives up a connection whose answer was lost while the server ran the statement', async () => {
    await open(500);
    const running = sql`SELECT pg_sleep(1.5)`.execute(db.db);
    // The server runs it (its session active), then its answer finds the path gone.
    await sleep(300);
    await proxy.cutOpen();
    const error = await failure(running);
    expect(isDatabaseUnavailable(error), error.message).toBe(true);
    expect(givenUp).toHaveLength(1);
    expect(givenUp[0]).toMatch(/its session \(\d+\) has not been running it/);
    expect((await sql<{ n: number }>`SELECT 4 AS n`.execute(db.db)).rows).toEqual([{ n: 4 }]);
  });

  it('gives up a connection when the server cannot be reached on a new one either, and recovers when it can', async () => {
    await open(500);
    await sql`SELECT 1`.execute(db.db);
    await proxy.partition();
    // A statement on the pooled connection, and others waiting for connections of their own.
    const errors = await Promise.all(Array.from({ length: 3 }, () => failure(sql`SELECT 5`.execute(db.db))));
    for (const error of errors) expect(isDatabaseUnavailable(error), error.message).toBe(true);
    expect(
      givenUp.some((line) => /the server did not answer a new connection either/.test(line)),
      givenUp.join('\n'),
    ).toBe(true);
    await proxy.pass();
    expect((await sql<{ n: number }>`SELECT 6 AS n`.execute(db.db)).rows).toEqual([{ n: 6 }]);
  });

  it('with 0, a statement on a dropped path waits until the connection fails by other means', async () => {
    await open(0);
    await sql`SELECT 1`.execute(db.db);
    await proxy.cutOpen();
    let settled = false;
    const waiting = sql`SELECT 7`.execute(db.db).finally(() => (settled = true));
    waiting.catch(() => undefined);
    await sleep(3000); // six times the check above
    expect(settled).toBe(false);
    // The proxy closes every side: the connection fails at last.
    await proxy.close();
    expect(isDatabaseUnavailable(await failure(waiting))).toBe(true);
    expect(givenUp.every((line) => !/went unanswered/.test(line))).toBe(true);
  });
});

describe.skipIf(!postgres.available)('a look-up the server refuses', () => {
  it('leaves the statement alone: a server that refuses a connection (too many for the role) was reached', async () => {
    const role = `u_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    await admin.query(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 1`);
    const url = new URL(POSTGRES_URL);
    url.username = role;
    const givenUp: string[] = [];
    const db = openDatabase(
      { kind: 'postgres', url: url.toString(), poolMax: 1, connectTimeoutMs: 1000, unansweredCheckMs: 300 },
      { onConnectionLost: (error) => givenUp.push(error.message) },
    );
    try {
      // Its one connection runs the statement; each look-up is refused with 53300.
      const slept = await sql<{ slept: string }>`SELECT pg_sleep(1.5)::text AS slept`.execute(db.db);
      expect(slept.rows).toEqual([{ slept: '' }]);
      expect(givenUp).toEqual([]);
    } finally {
      await db.close();
      await admin.query(`DROP ROLE ${role}`);
      await admin.end();
    }
  });
});

/**
 * Behind a pooler the client's connection is not a server session (PgBouncer names a process of
 * its own at login), so the session cannot be looked up: a slow statement is never taken for a lost
 * one, and only a pooler that cannot be reached gives the connection up.
 */
describe.skipIf(!postgres.available || !pgbouncerBinaryAvailable())(
  'statements through PgBouncer (transaction pooling)',
  () => {
    let bouncer: OwnPgBouncer;
    let db: Database | undefined;
    let givenUp: string[];

    const open = () => {
      givenUp = [];
      db = openDatabase(
        { kind: 'postgres', url: bouncer.url, poolMax: 2, connectTimeoutMs: 1000, unansweredCheckMs: 300 },
        { onConnectionLost: (error) => givenUp.push(error.message) },
      );
      return db;
    };
    beforeAll(async () => {
      bouncer = await OwnPgBouncer.create();
      await bouncer.start();
    });
    afterEach(async () => {
      bouncer.resume();
      await db?.close();
      db = undefined;
    });
    afterAll(async () => {
      await bouncer?.stop();
    });

    it('leaves a slow statement alone: the session the pooler named is not the server’s', async () => {
      const { db: kysely } = open();
      // The connection's own session, as the server and as the pooler name it, differ.
      const client = new pg.Client({ connectionString: bouncer.url });
      await client.connect();
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      expect(rows[0]!.pid).not.toBe((client as pg.Client & { processID: number }).processID);
      await client.end();
      const slept = await sql<{ slept: string }>`SELECT pg_sleep(1.5)::text AS slept`.execute(kysely);
      expect(slept.rows).toEqual([{ slept: '' }]);
      expect(givenUp).toEqual([]);
    });

    it('gives up the connection when the pooler stops answering', async () => {
      const { db: kysely } = open();
      await sql`SELECT 1`.execute(kysely);
      bouncer.pause();
      const error = await failure(sql`SELECT 2`.execute(kysely));
      expect(isDatabaseUnavailable(error), error.message).toBe(true);
      expect(
        givenUp.some((line) => /the server did not answer a new connection either/.test(line)),
        givenUp.join('\n'),
      ).toBe(true);
      bouncer.resume();
      expect((await sql<{ n: number }>`SELECT 3 AS n`.execute(kysely)).rows).toEqual([{ n: 3 }]);
    });
  },
);
