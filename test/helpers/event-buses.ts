import { EmbeddedLogEventBus } from '../../src/adapters/event-bus/embedded-log/embedded-log-event-bus.js';
import { NatsEventBus } from '../../src/adapters/event-bus/nats-event-bus.js';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import { migrateToLatest } from '../../src/adapters/storage/migrations.js';
import type { EventBus } from '../../src/ports/event-bus.js';
import { type Backend, postgres, sqlite, testConfig, type TestDatabase } from './backends.js';
import { connectTestNatsBus, uniqueNatsPrefix } from './nats.js';
import { NATS_URL, natsAvailable } from './services.js';

/** Options that make redelivery and rebalancing quick enough for tests. */
export const FAST_BUS = { partitions: 4, leaseMs: 1000, pollMs: 50, retryDelayMs: 50, batchSize: 100 } as const;

/** A family of buses sharing one broker (or one database), as several processes would. */
export interface BusFamily {
  readonly env: Record<string, string>;
  connect(): Promise<EventBus>;
  destroy(): Promise<void>;
}

export interface BusKind {
  readonly name: 'embedded' | 'nats';
  available(): Promise<boolean>;
  family(): Promise<BusFamily>;
}

export const embedded: BusKind = {
  name: 'embedded',
  available: async () => true,
  async family() {
    const testDb: TestDatabase = await sqlite.create();
    const databases: Database[] = [];
    const first = openDatabase(testConfig(testDb.databaseUrl).database);
    await migrateToLatest(first.db, first.dialect);
    databases.push(first);
    const buses: EventBus[] = [];
    return {
      env: { DATABASE_URL: testDb.databaseUrl },
      async connect() {
        const database = openDatabase(testConfig(testDb.databaseUrl).database);
        databases.push(database);
        const bus = new EmbeddedLogEventBus(database.db, FAST_BUS);
        buses.push(bus);
        return bus;
      },
      async destroy() {
        await Promise.all(buses.map((b) => b.close()));
        await Promise.all(databases.map((d) => d.close()));
        await testDb.drop();
      },
    };
  },
};

export const nats: BusKind = {
  name: 'nats',
  available: natsAvailable,
  async family() {
    const prefix = uniqueNatsPrefix('t');
    const buses: NatsEventBus[] = [];
    return {
      env: { NATS_URL, NATS_PREFIX: prefix },
      async connect() {
        const bus = await connectTestNatsBus(NATS_URL, prefix);
        buses.push(bus);
        return bus;
      },
      async destroy() {
        await buses[0]?.destroy();
        await Promise.all(buses.map((b) => b.close()));
      },
    };
  },
};

export const BUS_KINDS: readonly BusKind[] = [embedded, nats];

/** A database and a bus for an app: the embedded bus in the database, or NATS JetStream beside it. */
export interface BusVariant {
  readonly name: string;
  readonly backend: Backend;
  readonly nats: boolean;
  /** Whether it can run here: the database is available, and NATS too where it is used. */
  readonly available: boolean;
}

/** The embedded bus on SQLite and on PostgreSQL, and NATS JetStream (named `natsName`) beside `natsBackend`. */
export function busVariants(natsUp: boolean, natsName: string, natsBackend: Backend = sqlite): BusVariant[] {
  return [
    { name: 'the embedded bus on sqlite', backend: sqlite, nats: false, available: sqlite.available },
    { name: 'the embedded bus on postgres', backend: postgres, nats: false, available: postgres.available },
    { name: natsName, backend: natsBackend, nats: true, available: natsBackend.available && natsUp },
  ];
}
