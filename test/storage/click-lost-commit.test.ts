/**
 * A click flush whose COMMIT went through but whose answer was lost (the connection cut as the
 * answer came back): the click buffer writes the chunk again, and the database adds it once. Real
 * PostgreSQL behind a proxy that delivers the COMMIT and cuts the connection as its answer arrives,
 * the real repository and outbox, the real buffer; the checker reads the tables directly.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransactionalOutbox } from '../../src/adapters/event-bus/outbox.js';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import { KyselyUrlMappingRepository } from '../../src/adapters/storage/kysely-url-mapping-repository.js';
import { migrateToLatest } from '../../src/adapters/storage/migrations.js';
import type { EventEnvelope } from '../../src/domain/events.js';
import { urlEvents } from '../../src/domain/url-events.js';
import { ClickBuffer } from '../../src/support/click-buffer.js';
import { postgres, type TestDatabase, testConfig } from '../helpers/backends.js';
import { storedClicks } from '../helpers/stored-clicks.js';
import { PG_COMMIT, TcpProxy } from '../helpers/tcp-proxy.js';

describe.skipIf(!postgres.available)('a click flush whose commit answer is lost, on PostgreSQL', () => {
  let testDatabase: TestDatabase;
  let direct: Database;
  let proxied: Database;
  let proxy: TcpProxy;

  beforeAll(async () => {
    testDatabase = await postgres.create();
    direct = openDatabase(testConfig(testDatabase.databaseUrl).database);
    await migrateToLatest(direct.db, direct.dialect);
    const url = new URL(testDatabase.databaseUrl);
    proxy = await TcpProxy.start(url.hostname, Number(url.port || 5432));
    url.host = `127.0.0.1:${proxy.port}`;
    proxied = openDatabase(testConfig(url.toString()).database);
  });
  afterAll(async () => {
    await proxied?.close();
    await proxy?.close();
    await direct?.close();
    await testDatabase?.drop();
  });

  /** The `url.clicked` events recorded for `id`, as their counts. */
  const clickedEvents = async (id: number) => {
    const rows = await direct.db.selectFrom('event_outbox').select('envelope').execute();
    return rows
      .map((row) => JSON.parse(row.envelope) as EventEnvelope<{ clicks: { id: number; count: number }[] }>)
      .filter((e) => e.event_type === 'url.clicked')
      .flatMap((e) => e.payload.clicks.filter((c) => c.id === id).map((c) => c.count));
  };

  it('counts the chunk once and records its url.clicked once, and the clicks after it as well', async () => {
    const repository = new KyselyUrlMappingRepository(proxied.db, proxied.dialect, new TransactionalOutbox('test'));
    const failures: unknown[] = [];
    const buffer = new ClickBuffer(
      repository,
      { flushIntervalMs: 60_000, compactIntervalMs: 60_000 },
      urlEvents('test').clicked,
    );
    buffer.start({ error: (object) => failures.push(object) });
    const link = await repository.create({
      code: 'lost0001',
      url: 'https://example.com/lost',
      created_at: '2024-01-01T00:00:00Z',
      click_count: 0,
    });

    for (let i = 0; i < 3; i++) buffer.record(link.id);
    const lost = proxy.loseAnswerTo(PG_COMMIT);
    await buffer.flush();
    await lost;
    // The flush failed as far as the buffer knows; the database has the clicks all the same.
    expect(failures).toHaveLength(1);
    expect(await storedClicks(direct.db, { id: link.id })).toBe(3);
    expect(buffer.pending(link.id)).toBe(3);

    buffer.record(link.id);
    await buffer.flush();
    expect(failures).toHaveLength(1);
    expect(buffer.pending(link.id)).toBe(0);
    expect(await storedClicks(direct.db, { id: link.id })).toBe(4);
    expect(await clickedEvents(link.id)).toEqual([3, 1]);

    await buffer.stop();
    expect(await storedClicks(direct.db, { id: link.id })).toBe(4);
  });
});
