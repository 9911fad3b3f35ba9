import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { EmbeddedLogEventBus } from '../../src/adapters/event-bus/embedded-log/embedded-log-event-bus.js';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import type { EventBus } from '../../src/ports/event-bus.js';
import { postgres, type TestDatabase, testConfig } from './backends.js';
import { type BusVariant, busVariants, FAST_BUS } from './event-buses.js';
import { lazy } from './lazy.js';
import { connectTestNatsBus, deleteNatsStreams, uniqueNatsPrefix } from './nats.js';
import { terminateConnections } from './outbox-census.js';
import { type ServerProcess, startServer } from './server-process.js';
import { holdWriteLock } from './storage.js';
import { postgresBehindProxy, type TcpProxy } from './tcp-proxy.js';
import { NATS_URL, natsAvailable, POSTGRES_URL } from './services.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Pauses between the dropping of the fleet's PostgreSQL connections (7 drops over 7 s). */
const DROPS_MS = [300, 400, 800, 1_500, 2_200, 800, 1_000];
/** For `failDatabase`: the fleet's connections dropped every 40 ms for 6 s, so that short transactions die in flight too. */
export const DROP_STORM_MS: readonly number[] = Array.from({ length: 150 }, () => 40);

/** Where a fleet runs: the embedded bus on SQLite and on PostgreSQL, and NATS JetStream with PostgreSQL. */
export const FLEET_VARIANTS = busVariants(await natsAvailable(), 'NATS JetStream, on postgres', postgres);

/**
 * The built service as the distributed mode runs it, on one database and bus: an API process
 * (`serve --role api`) and worker processes (`serve --role worker`), for tests that count what
 * was acknowledged against what arrived while the database fails under them.
 */
export interface Fleet {
  readonly database: TestDatabase;
  /** The first API process. */
  readonly api: ServerProcess;
  readonly apis: ServerProcess[];
  readonly workers: ServerProcess[];
  /** The bus's NATS stream prefix, when the variant is on NATS. */
  readonly natsPrefix: string | undefined;
  /**
   * With `workersBehindProxy` (PostgreSQL only): the proxy every worker process reaches the
   * database through, that the test cuts to cut the workers off alone.
   */
  readonly workerProxy: TcpProxy | undefined;
  /**
   * Makes the database fail under the fleet for a few seconds (PostgreSQL: every connection of
   * the fleet dropped, seven times over 7 s, or after each of `drops`' pauses (ms) when given,
   * for as long as the pauses add up to: a drop that is slow to answer shortens the next ones;
   * SQLite: another process holds the write lock 6 s, past the busy timeout, then 4 s to recover);
   * what it did.
   */
  failDatabase(drops?: readonly number[]): Promise<string>;
  /** Starts one more worker process on the fleet's database and bus (a worker joining its groups). */
  addWorker(): Promise<ServerProcess>;
  /** Kills what is left of the fleet and removes its database and streams. */
  destroy(): Promise<void>;
}

export interface FleetOptions {
  /** Worker processes (2 unless given). */
  readonly workers?: number;
  /** API processes (1 unless given). */
  readonly apis?: number;
  /** PostgreSQL only: the workers reach the database through a proxy of their own (`Fleet.workerProxy`). */
  readonly workersBehindProxy?: boolean;
}

/** Starts API processes and worker processes on a new database of `variant`, with `env`. */
export async function startFleet(
  variant: BusVariant,
  env: Record<string, string>,
  { workers = 2, apis = 1, workersBehindProxy = false }: FleetOptions = {},
): Promise<Fleet> {
  if (workersBehindProxy && variant.backend.name !== 'postgres') throw new Error('only PostgreSQL can be proxied');
  const database = await variant.backend.create();
  const applicationName = `fleet_${randomBytes(4).toString('hex')}`;
  const natsPrefix = variant.nats ? uniqueNatsPrefix('fleet') : undefined;
  const url = new URL(database.databaseUrl);
  // The fleet's connections only: the test's own and other tests' are never dropped.
  if (variant.backend.name === 'postgres') url.searchParams.set('application_name', applicationName);
  const fleetEnv = {
    ...env,
    DATABASE_URL: url.toString(),
    ...(natsPrefix ? { NATS_URL, NATS_PREFIX: natsPrefix } : {}),
  };
  const started: ServerProcess[] = [];
  let workerProxy: TcpProxy | undefined;
  let workerEnv: Record<string, string> = fleetEnv;
  const destroy = async () => {
    for (const server of started) await server.stop('SIGKILL');
    await workerProxy?.close();
    if (natsPrefix) await deleteNatsStreams(natsPrefix);
    await database.drop();
  };
  const startWorker = async () => {
    const worker = await startServer(workerEnv, ['serve', '--role', 'worker']);
    started.push(worker);
    return worker;
  };
  try {
    // One after the other: the first makes the schema (and an administrator from the env).
    for (let i = 0; i < apis; i++) started.push(await startServer(fleetEnv, ['serve', '--role', 'api']));
    if (workersBehindProxy) {
      const behind = await postgresBehindProxy(fleetEnv.DATABASE_URL);
      workerProxy = behind.proxy;
      workerEnv = { ...fleetEnv, DATABASE_URL: behind.url };
    }
    for (let i = 0; i < workers; i++) await startWorker();
  } catch (error) {
    await destroy();
    throw error;
  }
  return {
    database,
    api: started[0]!,
    apis: started.slice(0, apis),
    workers: started.slice(apis),
    natsPrefix,
    workerProxy,
    addWorker: startWorker,
    destroy,
    async failDatabase(drops = DROPS_MS) {
      if (variant.backend.name === 'sqlite') {
        await sleep(300);
        const lock = holdWriteLock(database.databaseUrl);
        await sleep(6_000);
        lock.release();
        await sleep(4_000);
        return 'another process held the write lock for 6 s';
      }
      // One connection for every drop, and no longer than the pauses add up to: on a loaded
      // 2-core machine each drop took 250-870 ms through a new connection, and the storm of 150
      // drops 58 s instead of 6.
      const admin = new pg.Client({ connectionString: POSTGRES_URL });
      await admin.connect();
      const ended: number[] = [];
      try {
        const until = Date.now() + drops.reduce((a, b) => a + b, 0);
        for (const pause of drops) {
          await sleep(pause);
          ended.push(await terminateConnections(applicationName, admin));
          if (Date.now() >= until) break;
        }
      } finally {
        await admin.end();
      }
      const connections = ended.reduce((a, b) => a + b, 0);
      if (connections <= 3) throw new Error(`the fleet had no connections to drop: ${ended.join('+')}`);
      return `pg_terminate_backend x${ended.length} (${connections} connections)`;
    },
  };
}

/**
 * A fleet of `variant` for the suite this is called in (see `startFleet`): started in its
 * `beforeAll` when the variant is available, destroyed in its `afterAll`.
 */
export function useFleet(variant: BusVariant, env: Record<string, string>, options: FleetOptions = {}): Fleet {
  let fleet: Fleet | undefined;
  beforeAll(async () => {
    if (variant.available) fleet = await startFleet(variant, env, options);
  }, 90_000);
  afterAll(async () => {
    await fleet?.destroy();
  });
  return lazy(() => {
    if (!fleet) throw new Error(`no fleet on ${variant.name} (not available, or not started yet)`);
    return fleet;
  });
}

/**
 * The test's own connection to a `useFleet` fleet's database (to count what arrived), opened
 * after the fleet has started and closed before it is destroyed.
 */
export function useFleetReader(variant: BusVariant, fleet: Fleet): Database {
  let reader: Database | undefined;
  beforeAll(() => {
    if (variant.available) reader = openDatabase(testConfig(fleet.database.databaseUrl).database);
  });
  afterAll(async () => {
    await reader?.close();
  });
  return lazy(() => {
    if (!reader) throw new Error(`no fleet database on ${variant.name} (not available, or not opened yet)`);
    return reader;
  });
}

export interface FleetBus {
  readonly bus: EventBus;
  close(): Promise<void>;
}

/**
 * A publisher and subscriber of the test's own on a fleet's bus (as another process of the
 * deployment would be): on NATS JetStream under the fleet's prefix, else the embedded log over a
 * database connection of its own. Closing it closes that connection too.
 */
export async function connectFleetBus(fleet: Fleet): Promise<FleetBus> {
  const { natsPrefix } = fleet;
  if (natsPrefix) {
    const bus = await connectTestNatsBus(NATS_URL, natsPrefix, 3_000);
    return { bus, close: () => bus.close() };
  }
  const own = openDatabase(testConfig(fleet.database.databaseUrl).database);
  const bus = new EmbeddedLogEventBus(own.db, FAST_BUS);
  return {
    bus,
    async close() {
      await bus.close();
      await own.close();
    },
  };
}
