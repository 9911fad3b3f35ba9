/**
 * Issue 11's measurement: N `POST /shorten` at concurrency C spread over two API instances of the
 * built service (`serve --role api`) on a fresh PostgreSQL schema and NATS (a fresh stream
 * prefix); once the outbox has drained, the acknowledged codes are counted against the
 * `url.created` events in the JetStream stream.
 *
 *   npm run build   # or: npx tsc -p tsconfig.build.json
 *   node --import tsx scripts/outbox-check.ts [--requests 20000] [--concurrency 32] [--instances 2]
 *
 * Uses DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test; a schema of its own is
 * created and dropped) and NATS_URL (default nats://127.0.0.1:4222; its streams are deleted
 * afterwards). Prints one JSON line: acknowledged, refused, events found, missing, duplicated.
 * Exits 1 when an event is missing or duplicated.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { connect as natsConnect } from 'nats';
import {
  census,
  CENSUS_ENV,
  createdInStream,
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
  },
});
const requests = Number(values.requests);
const concurrency = Number(values.concurrency);
const instances = Number(values.instances);
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

const schema = `outbox_check_${randomBytes(4).toString('hex')}`;
const prefix = `ochk${randomBytes(4).toString('hex')}_`;
const url = new URL(databaseUrl);
url.searchParams.set('options', `-c search_path=${schema}`);
const schemaUrl = url.toString();

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

const processes: ServerProcess[] = [];
let failed = false;
await withPostgres(databaseUrl, (client) => client.query(`CREATE SCHEMA ${schema}`));
try {
  const env = { ...CENSUS_ENV, DATABASE_URL: schemaUrl, NATS_URL: natsUrl, NATS_PREFIX: prefix };
  for (let i = 0; i < instances; i++) processes.push(await startServer(env, ['serve', '--role', 'api']));
  const started = Date.now();
  const load = await shortenLoad(
    processes.map((p) => p.url),
    requests,
    concurrency,
  );
  const loadSeconds = (Date.now() - started) / 1000;
  const leftInOutbox = await outboxEmptied(schemaUrl, 120_000);
  const drainedSeconds = (Date.now() - started) / 1000;
  const result = census(load.acknowledged, await createdInStream(natsUrl, prefix));
  failed = result.missing.length > 0 || result.duplicated.length > 0 || leftInOutbox > 0;
  console.log(
    JSON.stringify({
      requests,
      concurrency,
      instances,
      acknowledged: result.acknowledged,
      refused: Object.fromEntries(load.refused),
      events_found: result.found,
      missing: result.missing.length,
      duplicated: result.duplicated.length,
      left_in_outbox: leftInOutbox,
      load_seconds: loadSeconds,
      drained_after_seconds: drainedSeconds,
      missing_sample: result.missing.slice(0, 5),
    }),
  );
} finally {
  await Promise.all(processes.map((p) => p.stop('SIGTERM')));
  await withPostgres(databaseUrl, (client) => client.query(`DROP SCHEMA ${schema} CASCADE`));
  await deleteStreams().catch(() => undefined);
}
process.exit(failed ? 1 : 0);
