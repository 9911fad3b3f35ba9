/**
 * Issue 11's measurement: N `POST /shorten` at concurrency C spread over two instances of the
 * built service on a fresh database, then the acknowledged codes counted against the
 * `url.created` events on the bus.
 *
 * - `--bus nats` (default): `serve --role api` instances on PostgreSQL and NATS (a fresh stream
 *   prefix); once the outbox has drained, the JetStream stream is read.
 * - `--bus embedded`: `serve` instances (each also running the consumers) on PostgreSQL, or on
 *   one SQLite file with `--db sqlite`; the log is read, its offsets checked for holes, and the
 *   event store (the consumer group the instances share) is counted too.
 *
 *   npx tsc -p tsconfig.build.json   # the service is started from dist/
 *   node --import tsx scripts/outbox-check.ts [--requests 20000] [--concurrency 32] [--instances 2]
 *     [--bus nats|embedded] [--db postgres|sqlite]
 *
 * Uses DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test; a schema of its own is
 * created and dropped) and NATS_URL (default nats://127.0.0.1:4222; its streams are deleted
 * afterwards). Prints one JSON line: acknowledged, refused, events found, missing, duplicated.
 * Exits 1 when an event is missing or duplicated.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connect as natsConnect } from 'nats';
import {
  census,
  CENSUS_ENV,
  createdInLog,
  createdInStore,
  createdInStream,
  logHoles,
  outboxEmptied,
  shortenLoad,
  withPostgres,
} from '../test/helpers/outbox-census.js';
import { type ServerProcess, startServer } from '../test/helpers/server-process.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '20000' },
    concurrency: { type: 'string', default: '32' },
    instances: { type: 'string', default: '2' },
    bus: { type: 'string', default: 'nats' },
    db: { type: 'string', default: 'postgres' },
  },
});
const requests = Number(values.requests);
const concurrency = Number(values.concurrency);
const instances = Number(values.instances);
const nats = values.bus !== 'embedded';
const onSqlite = !nats && values.db === 'sqlite';
const postgresUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

const schema = `outbox_check_${randomBytes(4).toString('hex')}`;
const prefix = `ochk${randomBytes(4).toString('hex')}_`;
const sqliteDir = onSqlite ? mkdtempSync(join(tmpdir(), 'outbox-check-')) : undefined;
const url = new URL(postgresUrl);
url.searchParams.set('options', `-c search_path=${schema}`);
const databaseUrl = sqliteDir ? `sqlite:${join(sqliteDir, 'check.db')}` : url.toString();

async function deleteStreams(): Promise<void> {
  const nc = await natsConnect({ servers: natsUrl.replace(/^nats:\/\//, '') });
  try {
    const jsm = await nc.jetstreamManager();
    for await (const info of jsm.streams.list()) {
      if (info.config.name.startsWith(prefix)) await jsm.streams.delete(info.config.name);
    }
  } finally {
    await nc.close();
  }
}

/** What the bus holds, and (embedded) what the event store took and any holes in the log. */
async function onTheBus(acknowledged: readonly string[]) {
  if (nats) {
    const left = await outboxEmptied(databaseUrl, 120_000);
    return { left_in_outbox: left, bus: census(acknowledged, await createdInStream(natsUrl, prefix)) };
  }
  const deadline = Date.now() + 120_000;
  let store = census(acknowledged, await createdInStore(databaseUrl));
  while (store.missing.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    store = census(acknowledged, await createdInStore(databaseUrl));
  }
  return {
    bus: census(acknowledged, await createdInLog(databaseUrl)),
    log_holes: await logHoles(databaseUrl, 'url_events'),
    event_store: { found: store.found, missing: store.missing.length, duplicated: store.duplicated.length },
  };
}

const processes: ServerProcess[] = [];
let failed: boolean;
if (!sqliteDir) await withPostgres(postgresUrl, (client) => client.query(`CREATE SCHEMA ${schema}`));
try {
  const bus: Record<string, string> = nats ? { NATS_URL: natsUrl, NATS_PREFIX: prefix } : { EVENT_POLL_MS: '50' };
  const env = { ...CENSUS_ENV, DATABASE_URL: databaseUrl, ...bus };
  const args = nats ? ['serve', '--role', 'api'] : ['serve'];
  for (let i = 0; i < instances; i++) processes.push(await startServer(env, args));
  const started = Date.now();
  const load = await shortenLoad(
    processes.map((p) => p.url),
    requests,
    concurrency,
  );
  const loadSeconds = (Date.now() - started) / 1000;
  const { bus: result, ...more } = await onTheBus(load.acknowledged);
  failed =
    result.missing.length > 0 ||
    result.duplicated.length > 0 ||
    (more.left_in_outbox ?? 0) > 0 ||
    (more.event_store?.missing ?? 0) > 0 ||
    (more.log_holes?.length ?? 0) > 0;
  console.log(
    JSON.stringify({
      bus: nats ? 'nats' : 'embedded',
      database: sqliteDir ? 'sqlite' : 'postgres',
      requests,
      concurrency,
      instances,
      acknowledged: result.acknowledged,
      refused: Object.fromEntries(load.refused),
      events_found: result.found,
      missing: result.missing.length,
      duplicated: result.duplicated.length,
      ...more,
      load_seconds: loadSeconds,
      checked_after_seconds: (Date.now() - started) / 1000,
      missing_sample: result.missing.slice(0, 5),
    }),
  );
} finally {
  await Promise.all(processes.map((p) => p.stop('SIGTERM')));
  if (sqliteDir) rmSync(sqliteDir, { recursive: true, force: true });
  else await withPostgres(postgresUrl, (client) => client.query(`DROP SCHEMA ${schema} CASCADE`));
  if (nats) await deleteStreams().catch(() => undefined);
}
process.exit(failed ? 1 : 0);
