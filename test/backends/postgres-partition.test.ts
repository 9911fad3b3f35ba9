/**
 * An instance cut off from PostgreSQL in the middle of a transaction, without the server hearing
 * of it (its host gone, a network split, its process frozen): the server keeps that session, and
 * its locks, until its TCP keepalive gives up on the client (two hours by default). With
 * DB_IDLE_IN_TRANSACTION_TIMEOUT_MS the server ends the session after that long idle in its
 * transaction, and the other instances go on: their visit merge (which stops while another holds
 * the merge's lock) and an edit of a link whose row the lost session had locked. The cut is a TCP
 * proxy that stops forwarding and keeps the server's side open (test/helpers/tcp-proxy.ts).
 */
import { sql } from 'kysely';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KyselyVisitJournal } from '../../src/adapters/storage/kysely-visit-journal.js';
import { compose, type Service } from '../../src/composition/compose.js';
import { mergeJournal } from '../../src/composition/visits.js';
import { postgres, type TestDatabase, testConfig } from '../helpers/backends.js';
import { codeMaker, createMapping, newMapping, patchMapping } from '../helpers/http.js';
import { postgresBehindProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { rollupsAndRecount, visitEachLink } from '../helpers/visits.js';

describe.skipIf(!postgres.available)('an instance cut off from PostgreSQL inside a transaction', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  /** The instance that is cut off (through the proxy), and the one that goes on (direct). */
  let lost: Service | undefined;
  let going: Service;

  /** The going instance's connections' name, to find them among the server's sessions. */
  const goingName = `urlshortener_${randomBytes(4).toString('hex')}`;

  const start = async (idleInTransactionMs: string) => {
    database = await postgres.create();
    const behind = await postgresBehindProxy(database.databaseUrl);
    proxy = behind.proxy;
    const env = { DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: idleInTransactionMs, RATE_LIMIT_ENABLED: 'false' };
    lost = await compose(testConfig(behind.url, env), { logger: false, background: false });
    const named = new URL(database.databaseUrl);
    named.searchParams.set('application_name', goingName);
    going = await compose(testConfig(named.toString(), env), { logger: false, background: false });
    await Promise.all([lost.app.ready(), going.app.ready()]);
  };

  /** Whether one of the going instance's sessions is waiting for a lock. */
  const goingWaitsForALock = async () =>
    Number(
      (
        await sql<{ n: number }>`SELECT count(*) AS n FROM pg_stat_activity
          WHERE application_name = ${goingName} AND wait_event_type = 'Lock'`.execute(going.database.db)
      ).rows[0]!.n,
    ) > 0;
  beforeEach(() => {
    lost = undefined;
  });
  afterEach(async () => {
    // Closing the proxy closes the server's side of the cut session, if it is still open.
    await proxy?.close();
    await lost?.close().catch(() => undefined);
    await going?.close();
    await database?.drop();
  });

  /**
   * The lost instance begins a transaction, runs `statements` in it, and is cut off before its
   * next one (which never arrives): resolves once the cut is made. The transaction ends with an
   * error once the lost instance hears the session is gone (the proxy passing again, or closed).
   */
  const cutOffInside = async (statements: (trx: Service['database']['db']) => Promise<unknown>) => {
    let cutOff!: () => void;
    const made = new Promise<void>((resolve) => (cutOff = resolve));
    const transaction = lost!.database.db.transaction().execute(async (trx) => {
      await statements(trx);
      await proxy.partition();
      cutOff();
      await sql`SELECT 1`.execute(trx); // sent into the cut: never answered
    });
    transaction.catch(() => undefined);
    await made;
    return { transaction };
  };

  const journalRows = async () =>
    Number(
      (
        await going.database.db
          .selectFrom('visit_journal')
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('the server ends the lost session after DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: the merge and an edit go on, every visit merged once', async () => {
    await start('3000');
    // Set on the service's connections, beside their time zone.
    const shown = await sql<Record<string, string>>`SHOW idle_in_transaction_session_timeout`.execute(
      lost!.database.db,
    );
    expect(shown.rows[0]).toEqual({ idle_in_transaction_session_timeout: '3s' });
    expect((await sql`SHOW TIME ZONE`.execute(lost!.database.db)).rows[0]).toEqual({ TimeZone: 'UTC' });
    const made = codeMaker('ptn');
    const links = await Promise.all(Array.from({ length: 12 }, () => createMapping(going.app, newMapping(made))));
    const acknowledged = await visitEachLink(going, links, 3);
    expect(await journalRows()).toBeGreaterThan(0);
    // Cut off while merging (its lock taken) and editing the first link (its row locked).
    const edited = links[0]!;
    const { transaction } = await cutOffInside(async (trx) => {
      await sql`SELECT pg_advisory_xact_lock(${KyselyVisitJournal.PG_MERGE_LOCK})`.execute(trx);
      await trx
        .updateTable('url_mappings')
        .set({ url: 'https://lost.example/' })
        .where('code', '=', edited.code)
        .execute();
    });
    // An edit of the locked link waits for its row.
    const editing = patchMapping(going.app, edited.code, { url: 'https://going.example/' });
    let waited = false;
    for (let polls = 0; !waited && polls < 100; polls++) {
      waited = await goingWaitsForALock();
      if (!waited) await sleep(10);
    }
    expect(waited, 'the edit waited for the row the lost session holds').toBe(true);
    // While the server still holds the session, the going instance's merge stops (another merges).
    const journal = new KyselyVisitJournal(going.database.db, going.database.dialect);
    expect(await mergeJournal(journal)).toBe(0);
    expect(await journalRows()).toBeGreaterThan(0);
    // The server ends the session: the edit goes through.
    expect((await editing).statusCode).toBe(200);
    // The merge goes on, until the journal is empty.
    for (let tries = 0; (await journalRows()) > 0; tries++) {
      if (tries >= 100) throw new Error('the journal is never merged');
      await mergeJournal(journal);
      await sleep(100);
    }
    const stored = await going.database.db
      .selectFrom('url_mappings')
      .select(['id', 'code', 'url'])
      .where(
        'code',
        'in',
        links.map((link) => link.code),
      )
      .execute();
    expect(stored.find((row) => row.code === edited.code)?.url).toBe('https://going.example/');
    // Every acknowledged visit once: the day rows against their recount.
    for (const row of stored) {
      const { count, recount, stored: days } = await rollupsAndRecount(going.database.db, row.id);
      expect(count).toBe(acknowledged.get(row.code));
      expect(days).toEqual(recount);
    }
    // The path comes back: the lost instance hears its session was ended (its transaction failed,
    // nothing of it committed), and answers again on a new connection.
    await proxy.pass();
    await expect(transaction).rejects.toThrow();
    const again = await lost!.app.inject({ method: 'GET', url: `/${links[1]!.code}` });
    expect(again.statusCode).toBe(302);
    expect(again.headers.location).toBe(links[1]!.url);
  }, 60_000);

  it('with 0, the server keeps the lost session and its locks for as long as it does not hear of the cut', async () => {
    await start('0');
    // The server's own setting (its default, 0: none).
    const shown = await sql<Record<string, string>>`SHOW idle_in_transaction_session_timeout`.execute(
      lost!.database.db,
    );
    expect(shown.rows[0]).toEqual({ idle_in_transaction_session_timeout: '0' });
    const journal = new KyselyVisitJournal(going.database.db, going.database.dialect);
    const made = codeMaker('ptz');
    const links = await Promise.all(Array.from({ length: 3 }, () => createMapping(going.app, newMapping(made))));
    await visitEachLink(going, links, 3);
    const { transaction } = await cutOffInside((trx) =>
      sql`SELECT pg_advisory_xact_lock(${KyselyVisitJournal.PG_MERGE_LOCK})`.execute(trx),
    );
    // Five seconds on, longer than the timeout above, the merge still finds the lock held.
    await sleep(5_000);
    expect(await mergeJournal(journal)).toBe(0);
    expect(await journalRows()).toBeGreaterThan(0);
    // The server hears of the cut (the proxy closes its side): the lock is let go, the merge goes on.
    await proxy.close();
    await expect(transaction).rejects.toThrow();
    for (let tries = 0; (await journalRows()) > 0; tries++) {
      if (tries >= 50) throw new Error('the journal is never merged');
      await mergeJournal(journal);
      await sleep(100);
    }
  }, 60_000);
});
