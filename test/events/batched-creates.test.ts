/**
 * Creates made at once with their events (PostgreSQL batches them into one transaction; SQLite's
 * group commit shares one too): each create still answers for itself, an event that cannot be
 * recorded fails only its own create, and every stored mapping has exactly one event, in the
 * outbox table or appended to the embedded log at offsets without gaps.
 */
import { randomBytes } from 'node:crypto';
import SQLite from 'better-sqlite3';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { EmbeddedLogEventBus } from '../../src/adapters/event-bus/embedded-log/embedded-log-event-bus.js';
import { TransactionalOutbox } from '../../src/adapters/event-bus/outbox.js';
import { BatchedCreates } from '../../src/adapters/storage/batched-creates.js';
import { openDatabase } from '../../src/adapters/storage/database.js';
import { KyselyUrlMappingRepository } from '../../src/adapters/storage/kysely-url-mapping-repository.js';
import type { DatabaseSchema, EventTables } from '../../src/adapters/storage/schema.js';
import type { UrlMapping } from '../../src/domain/url-mapping.js';
import { urlEvents } from '../../src/domain/url-events.js';
import { toAppError } from '../../src/http/error-handler.js';
import { BACKENDS, postgres, testConfig } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { POSTGRES_URL } from '../helpers/services.js';
import { useOpenDatabase } from '../helpers/storage.js';

const MAX_EVENT_BYTES = 1000;
const events = urlEvents('batched-creates-test');

const mapping = (code: string, url = `https://example.com/${code}`) => ({
  code,
  url,
  created_at: '2024-01-01T00:00:00Z',
  click_count: 0,
});

describe.each(BACKENDS)('creates made at once, with their events, on $name', (backend) => {
  const { database, testDatabase } = useOpenDatabase(backend);

  /** 20 creates at once, one of them with an event over the size limit and two of one code. */
  async function createAtOnce(repo: KyselyUrlMappingRepository, prefix: string) {
    const inputs = Array.from({ length: 17 }, (_, i) => mapping(`${prefix}${String(i).padStart(3, '0')}`));
    const tooLarge = mapping(`${prefix}big`, `https://example.com/${'x'.repeat(MAX_EVENT_BYTES)}`);
    const twice = [mapping(`${prefix}two`), mapping(`${prefix}two`, 'https://example.com/other')];
    const settled = await Promise.allSettled(
      [...inputs, tooLarge, ...twice].map((m) => repo.create(m, (row) => [events.created(row)])),
    );
    const created = settled.slice(0, inputs.length).map((s) => (s.status === 'fulfilled' ? s.value : s.reason));
    expect(created).toEqual(inputs.map((m) => ({ id: expect.any(Number), ...m, owner: null })));
    expect(settled[inputs.length]).toMatchObject({ status: 'rejected', reason: { code: 'EVENT_TOO_LARGE' } });
    expect(await repo.findByCode(tooLarge.code)).toBeUndefined();
    const ofTwice = settled.slice(inputs.length + 1);
    expect(ofTwice.filter((s) => s.status === 'fulfilled')).toHaveLength(1);
    expect(ofTwice.filter((s) => s.status === 'rejected')).toMatchObject([{ reason: { statusCode: 409 } }]);
    return [...(created as UrlMapping[]), ...ofTwice.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []))].map(
      (m) => m.code,
    );
  }

  it.skipIf(!backend.available)('through the outbox table: one row per stored mapping', async () => {
    const outbox = new TransactionalOutbox('test', { maxEventBytes: MAX_EVENT_BYTES });
    const repo = new KyselyUrlMappingRepository(database.db, database.dialect, outbox);
    const stored = await createAtOnce(repo, 'bto');
    const rows = await (database.db as unknown as Kysely<EventTables>)
      .selectFrom('event_outbox')
      .select('envelope')
      .execute();
    const codes = rows
      .map((r) => (JSON.parse(r.envelope) as { payload: { code: string } }).payload.code)
      .filter((code) => code.startsWith('bto'));
    expect(codes.sort()).toEqual([...stored].sort());
  });

  it.skipIf(!backend.available)(
    'straight into the embedded log: one entry per stored mapping, offsets without gaps',
    async () => {
      const log = new EmbeddedLogEventBus(database.db, {
        partitions: 4,
        leaseMs: 10_000,
        pollMs: 1_000,
        retryDelayMs: 100,
        batchSize: 100,
        dialect: database.dialect,
      });
      const outbox = new TransactionalOutbox('test', { log, maxEventBytes: MAX_EVENT_BYTES });
      const repo = new KyselyUrlMappingRepository(database.db, database.dialect, outbox);
      // What a consumer of this process is handed (from the entries the appends keep in memory,
      // with the offsets they were given): each event once, at its offset in the table.
      const delivered: { code: string; at: string }[] = [];
      const subscription = await log.subscribe({
        group: 'batched-creates-check',
        topic: 'url_events',
        startAt: 'earliest',
        handler: async (m) => {
          delivered.push({ code: (m.envelope.payload as { code: string }).code, at: `${m.partition}:${m.offset}` });
        },
      });
      // One create alone first: its partition's counter exists, the others' not yet.
      const warm = await repo.create(mapping('btcwarm'), (row) => [events.created(row)]);
      // A batch where every create commits (PostgreSQL: one transaction, each partition's offsets taken at once) …
      const cleanBatch = (prefix: string) =>
        Promise.all(
          Array.from({ length: 24 }, (_, i) => repo.create(mapping(`${prefix}${i}xx`), (row) => [events.created(row)])),
        );
      // (twice: the first finds one partition's counter and creates the others', the second finds them all)
      const clean = [warm, ...(await cleanBatch('btc')), ...(await cleanBatch('btd'))];
      // … and one that runs again create by create.
      const stored = [...clean.map((m) => m.code), ...(await createAtOnce(repo, 'btl'))];
      // And again, so that the second batch's offsets follow the first's.
      const more = await createAtOnce(repo, 'btm');
      const entries = await (database.db as unknown as Kysely<EventTables>)
        .selectFrom('event_log')
        .select(['partition_no', 'log_offset', 'envelope'])
        .where('topic', '=', 'url_events')
        .execute();
      const codes = entries.map((e) => (JSON.parse(e.envelope) as { payload: { code: string } }).payload.code);
      expect(codes.sort()).toEqual([...stored, ...more].sort());
      for (let partition = 0; partition < 4; partition++) {
        const offsets = entries
          .filter((e) => e.partition_no === partition)
          .map((e) => Number(e.log_offset))
          .sort((a, b) => a - b);
        expect(offsets).toEqual(offsets.map((_, i) => i));
      }
      const inTable = entries
        .map((e) => ({
          code: (JSON.parse(e.envelope) as { payload: { code: string } }).payload.code,
          at: `${e.partition_no}:${Number(e.log_offset)}`,
        }))
        .sort((a, b) => a.code.localeCompare(b.code));
      await eventually(() => delivered.length >= inTable.length, { timeoutMs: 10_000 });
      expect([...delivered].sort((a, b) => a.code.localeCompare(b.code))).toEqual(inTable);
      await subscription.close();
      await log.close();
    },
  );

  /**
   * A batch whose transaction fails as a whole: every create of it is refused as the database
   * being unavailable (503), none of them is stored and none has an event; the same creates
   * succeed once the database takes writes again. SQLite: another connection holds the write
   * lock past the busy timeout. PostgreSQL: the batch's own connection is ended while the batch
   * waits inside its transaction (another client holds the log partition's counter).
   */
  it.skipIf(!backend.available)(
    'a batch that fails as a whole: all 503, none stored, no event',
    async () => {
      const applicationName = `btf_${randomBytes(4).toString('hex')}`;
      const url = new URL(testDatabase.databaseUrl);
      if (backend.name === 'postgres') url.searchParams.set('application_name', applicationName);
      const own = openDatabase(testConfig(url.toString()).database);
      const log = new EmbeddedLogEventBus(own.db, {
        partitions: 1,
        leaseMs: 10_000,
        pollMs: 1_000,
        retryDelayMs: 100,
        batchSize: 100,
        dialect: own.dialect,
      });
      const repo = new KyselyUrlMappingRepository(own.db, own.dialect, new TransactionalOutbox('test', { log }));
      const createAll = (codes: readonly string[]) =>
        Promise.allSettled(codes.map((code) => repo.create(mapping(code), (row) => [events.created(row)])));
      const codes = Array.from({ length: 20 }, (_, i) => `btf${String(i).padStart(3, '0')}`);
      try {
        await repo.create(mapping('btfwarm'), (row) => [events.created(row)]); // the partition's counter exists
        const failed =
          backend.name === 'sqlite'
            ? await whileSqliteLocked(url, () => createAll(codes))
            : await whilePostgresConnectionEnded(testDatabase.databaseUrl, applicationName, () => createAll(codes));
        expect(failed.map((s) => s.status)).toEqual(codes.map(() => 'rejected'));
        for (const s of failed) {
          const answer = toAppError((s as PromiseRejectedResult).reason as Error, {
            bodyLimit: 1,
            contentType: undefined,
          });
          expect(answer).toMatchObject({ statusCode: 503, detail: 'Database unavailable' });
        }
        for (const code of codes) expect(await repo.findByCode(code)).toBeUndefined();
        expect(await loggedCodes(database.db)).toEqual(['btfwarm']);

        const again = await createAll(codes);
        expect(again.map((s) => s.status)).toEqual(codes.map(() => 'fulfilled'));
        expect(await loggedCodes(database.db)).toEqual(['btfwarm', ...codes].sort());
      } finally {
        await log.close();
        await own.close();
      }
    },
    30_000,
  );
});

/**
 * Two instances (PostgreSQL: a pool each) whose batches take the same codes at once, in opposite
 * orders: rows taken in the order given would have each batch wait for a code the other holds,
 * a deadlock PostgreSQL ends after a second, and the batch run again create by create. In code
 * order, one waits for the other and finds its codes taken. (SQLite has one writer: no two
 * batches are ever open together.)
 */
describe.skipIf(!postgres.available)('creates batched at once by two instances, on postgres', () => {
  const { database, testDatabase } = useOpenDatabase(postgres);
  it('two instances batching the same codes at once in opposite orders: each code once, no batch run again', async () => {
    const other = openDatabase(testConfig(testDatabase.databaseUrl).database);
    let fallbacks = 0;
    const createOne = async (): Promise<UrlMapping> => {
      fallbacks++;
      throw new Error('the batch ran again create by create');
    };
    const instances = [database, other].map(
      (db) => new BatchedCreates(db.db, db.dialect, new TransactionalOutbox('test'), createOne),
    );
    try {
      for (let round = 0; round < 6; round++) {
        const codes = Array.from({ length: 250 }, (_, i) => `bto${round}x${String(i).padStart(3, '0')}`);
        const orders = [codes, codes.toReversed()];
        const settled = await Promise.all(
          instances.map((instance, i) =>
            Promise.allSettled(
              orders[i]!.map((code) => instance.create(mapping(code), (row) => [events.created(row)])),
            ),
          ),
        );
        const made = new Map<string, number>();
        for (const [i, outcomes] of settled.entries()) {
          for (const [j, outcome] of outcomes.entries()) {
            const code = orders[i]![j]!;
            if (outcome.status === 'fulfilled') made.set(code, (made.get(code) ?? 0) + 1);
            else expect(outcome.reason, code).toMatchObject({ statusCode: 409 });
          }
        }
        expect(fallbacks, `batches run again create by create, round ${round}`).toBe(0);
        expect(codes.filter((code) => made.get(code) !== 1)).toEqual([]);
      }
    } finally {
      await other.close();
    }
  }, 60_000);
});

/** The codes starting `btf` of the `url.created` events in the embedded log, sorted. */
async function loggedCodes(db: Kysely<DatabaseSchema>): Promise<string[]> {
  const rows = await (db as unknown as Kysely<EventTables>)
    .selectFrom('event_log')
    .select('envelope')
    .where('topic', '=', 'url_events')
    .execute();
  return rows
    .map((r) => (JSON.parse(r.envelope) as { payload: { code: string } }).payload.code)
    .filter((code) => code.startsWith('btf'))
    .sort();
}

/** Runs `work` while another connection holds the SQLite file's write lock (so past the busy timeout). */
async function whileSqliteLocked<T>(url: URL, work: () => Promise<T>): Promise<T> {
  const holder = new SQLite(url.pathname);
  holder.exec('BEGIN IMMEDIATE');
  try {
    return await work();
  } finally {
    holder.exec('ROLLBACK');
    holder.close();
  }
}

/**
 * Runs `work` while another client holds the log partitions' counters, and once a connection of
 * `applicationName` (the code under test's own, no one else's) waits for them, ends it.
 */
async function whilePostgresConnectionEnded<T>(
  databaseUrl: string,
  applicationName: string,
  work: () => Promise<T>,
): Promise<T> {
  const holder = new pg.Client({ connectionString: databaseUrl });
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  await holder.connect();
  await admin.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT * FROM event_partitions FOR UPDATE');
    const outcome = work();
    await eventually(async () => {
      const { rows } = await admin.query<{ ended: boolean }>(
        `SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity
         WHERE application_name = $1 AND wait_event_type = 'Lock'`,
        [applicationName],
      );
      if (rows.length === 0) throw new Error('the batch does not wait for the counters yet');
    });
    return await outcome;
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    await holder.end();
    await admin.end();
  }
}
