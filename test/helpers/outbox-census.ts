/**
 * Counts what concurrent writers had acknowledged against the `url.created` events that reached
 * the bus: the checker of the outbox tests (test/events/outbox-*.test.ts) and of
 * scripts/outbox-check.ts.
 */
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { AckPolicy, connect, DeliverPolicy, JSONCodec } from 'nats';
import pg from 'pg';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { openDatabase } from '../../src/adapters/storage/database.js';
import { testConfig } from './backends.js';
import { POSTGRES_URL } from './services.js';
import { storedCreatedByCode } from './event-store.js';

/**
 * Fixed settings of a service process in these runs (the same key everywhere, no rate limits;
 * logs at `info`, which startServer needs to see the address).
 */
export const CENSUS_ENV: Readonly<Record<string, string>> = {
  SECRET_KEY: 'outbox-census-secret-key-0123456789abcdef0123',
  NODE_ENV: 'test',
  RATE_LIMIT_ENABLED: 'false',
  SHUTDOWN_TIMEOUT_MS: '10000',
};

export interface LoadResult {
  /** Codes answered 201, in the order of their answers. */
  readonly acknowledged: string[];
  /** Answers other than 201 (or failed requests), by status. */
  readonly refused: Map<string, number>;
}

/** The letters of a load's prefix. */
const LETTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';

/**
 * `total` POST /shorten spread round-robin over `targets`, `concurrency` in flight at once. Each
 * code is new: a random prefix of 3 letters of 52 (140,608 of them), then a counter. (The prefix
 * was once the letters a-f of a hex string, 216 prefixes: two loads of one test drew the same one
 * about once in 200 runs, and the second load's creates were refused as taken.)
 */
export async function shortenLoad(targets: readonly string[], total: number, concurrency: number): Promise<LoadResult> {
  const prefix = Array.from(randomBytes(3), (byte) => LETTERS[byte % LETTERS.length]).join('');
  const acknowledged: string[] = [];
  const refused = new Map<string, number>();
  let next = 0;
  const worker = async () => {
    for (;;) {
      const n = next++;
      if (n >= total) return;
      const code = `${prefix}${String(n).padStart(7, '0')}`;
      const target = targets[n % targets.length]!;
      let status: string;
      try {
        status = String((await postCode(target, code)).status);
      } catch (error) {
        status = `error: ${(error as Error).message}`;
      }
      if (status === '201') acknowledged.push(code);
      else refused.set(status, (refused.get(status) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { acknowledged, refused };
}

/** `POST /shorten` of a new mapping with `code` to `target`: its status and body. */
export async function postCode(target: string, code: string): Promise<{ status: number; text: string }> {
  const response = await fetch(`${target}/shorten`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      code,
      url: `https://example.com/${code}`,
      created_at: '2024-01-01T00:00:00Z',
      click_count: 0,
    }),
  });
  return { status: response.status, text: await response.text() };
}

/**
 * Ends every PostgreSQL connection whose `application_name` is `applicationName` (set it in the
 * DATABASE_URL of the processes under test, so that no one else's connection is touched); how many.
 * Through `admin` when given (a connection of the test's that it keeps across many drops: a new
 * one each time took 50-160 ms of its own on a loaded 2-core machine), else a new connection.
 */
export async function terminateConnections(applicationName: string, admin?: pg.Client): Promise<number> {
  if (admin !== undefined) return terminateThrough(admin, applicationName);
  const own = new pg.Client({ connectionString: POSTGRES_URL });
  await own.connect();
  try {
    return await terminateThrough(own, applicationName);
  } finally {
    await own.end();
  }
}

async function terminateThrough(admin: pg.Client, applicationName: string): Promise<number> {
  const { rows } = await admin.query<{ ended: string }>(
    'SELECT count(pg_terminate_backend(pid)) AS ended FROM pg_stat_activity WHERE application_name = $1',
    [applicationName],
  );
  return Number(rows[0]!.ended);
}

/** The event ids of the `url.created` events found, per short code. */
export type CreatedByCode = Map<string, string[]>;

export interface Census {
  readonly acknowledged: number;
  /** `url.created` events found for acknowledged codes. */
  readonly found: number;
  /** Acknowledged codes without an event. */
  readonly missing: string[];
  /** Acknowledged codes with more than one event. */
  readonly duplicated: string[];
}

export function census(acknowledged: readonly string[], created: CreatedByCode): Census {
  const missing: string[] = [];
  const duplicated: string[] = [];
  let found = 0;
  for (const code of acknowledged) {
    const events = created.get(code) ?? [];
    found += events.length;
    if (events.length === 0) missing.push(code);
    if (events.length > 1) duplicated.push(code);
  }
  return { acknowledged: acknowledged.length, found, missing, duplicated };
}

const codec = JSONCodec<{ event_id: string; event_type: string; payload: { code?: string } }>();

/**
 * Every `url.created` event (or `eventType`'s) in the JetStream stream of `prefix`, read from its
 * start by a consumer of this function's own (removed afterwards), per code. Each stream message
 * counts: a message the broker stored twice shows as two events.
 */
export async function createdInStream(
  natsUrl: string,
  prefix: string,
  eventType = 'url.created',
): Promise<CreatedByCode> {
  const nc = await connect({ servers: natsUrl.replace(/^nats:\/\//, '') });
  const created: CreatedByCode = new Map();
  try {
    const jsm = await nc.jetstreamManager();
    const stream = `${prefix}url_events`;
    const total = (await jsm.streams.info(stream)).state.messages;
    const name = `census_${randomBytes(4).toString('hex')}`;
    await jsm.consumers.add(stream, {
      durable_name: name,
      ack_policy: AckPolicy.None,
      deliver_policy: DeliverPolicy.All,
    });
    try {
      const consumer = await nc.jetstream().consumers.get(stream, name);
      let seen = 0;
      while (seen < total) {
        const batch = await consumer.fetch({ max_messages: 1000, expires: 2000 });
        let got = 0;
        for await (const message of batch) {
          got++;
          const envelope = codec.decode(message.data);
          if (envelope.event_type !== eventType || !envelope.payload.code) continue;
          const code = envelope.payload.code;
          created.set(code, [...(created.get(code) ?? []), envelope.event_id]);
        }
        seen += got;
        if (got === 0) break;
      }
    } finally {
      await jsm.consumers.delete(stream, name).catch(() => undefined);
    }
  } finally {
    await nc.close();
  }
  return created;
}

/** Runs `query` on the database at `databaseUrl` (PostgreSQL) with one client. */
export async function withPostgres<T>(databaseUrl: string, query: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return await query(client);
  } finally {
    await client.end();
  }
}

/** Rows waiting in the outbox (PostgreSQL). */
export const outboxRows = (databaseUrl: string): Promise<number> =>
  withPostgres(databaseUrl, async (client) => {
    const { rows } = await client.query<{ n: string }>('SELECT count(*) AS n FROM event_outbox');
    return Number(rows[0]!.n);
  });

/** Waits until the outbox is empty (at most `timeoutMs`); the rows still there when it gives up. */
export async function outboxEmptied(databaseUrl: string, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const rows = await outboxRows(databaseUrl);
    if (rows === 0 || Date.now() > deadline) return rows;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Runs `work` on the service's database at `databaseUrl` (SQLite or PostgreSQL), then closes it. */
async function withDatabase<T>(databaseUrl: string, work: (db: Kysely<EventTables>) => Promise<T>): Promise<T> {
  const database = openDatabase(testConfig(databaseUrl).database);
  try {
    return await work(database.db as unknown as Kysely<EventTables>);
  } finally {
    await database.close();
  }
}

/** The `url.created` events (or `eventType`'s) in the embedded log, per code. */
export const createdInLog = (databaseUrl: string, eventType = 'url.created'): Promise<CreatedByCode> =>
  withDatabase(databaseUrl, async (db) => {
    const rows = await db
      .selectFrom('event_log')
      .select(['message_id', 'envelope'])
      .where('topic', '=', 'url_events')
      .execute();
    const created: CreatedByCode = new Map();
    for (const row of rows) {
      const envelope = JSON.parse(row.envelope) as { event_type: string; payload: { code?: string } };
      if (envelope.event_type !== eventType || !envelope.payload.code) continue;
      created.set(envelope.payload.code, [...(created.get(envelope.payload.code) ?? []), row.message_id]);
    }
    return created;
  });

/** The `url.created` events (or `eventType`'s) the event store consumer (a worker) stored, per code. */
export const createdInStore = (databaseUrl: string, eventType = 'url.created'): Promise<CreatedByCode> =>
  withDatabase(databaseUrl, (db) => storedCreatedByCode(db, eventType));

/**
 * Per partition of the embedded log's topic: offsets that are missing below the highest one, or
 * a counter that disagrees with the entries (both must be none: offsets are contiguous).
 */
export const logHoles = (databaseUrl: string, topic: string): Promise<string[]> =>
  withDatabase(databaseUrl, async (db) => {
    const rows = await db
      .selectFrom('event_log')
      .select([
        'partition_no',
        (eb) => eb.fn.countAll<string | number>().as('n'),
        (eb) => eb.fn.max('log_offset').as('top'),
      ])
      .where('topic', '=', topic)
      .groupBy('partition_no')
      .execute();
    const counters = await db.selectFrom('event_partitions').selectAll().where('topic', '=', topic).execute();
    const holes: string[] = [];
    for (const row of rows) {
      const next = counters.find((c) => c.partition_no === row.partition_no)?.next_offset;
      if (Number(row.n) !== Number(row.top) + 1)
        holes.push(`partition ${row.partition_no}: ${row.n} entries up to offset ${row.top}`);
      if (Number(next) !== Number(row.n))
        holes.push(`partition ${row.partition_no}: counter at ${next}, ${row.n} entries`);
    }
    return holes;
  });
