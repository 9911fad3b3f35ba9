/**
 * The expiry sweep is a write path nobody calls: every serving process, every second, claims the
 * links whose `expires_at` has passed (`expired_event_at`) and records their `url.expired` in the
 * same transaction. Here two API processes and a worker (all three sweep) run on one database
 * while it fails under them (PostgreSQL: every connection of theirs dropped every 40 ms for 6 s,
 * so that sweeps die in flight, a commit among them now and then; SQLite: another process holds
 * the write lock for 6 s), and the links come due one after another inside that window, with
 * nobody but the checker visiting them. The checker counts what is owed against what arrived: each link's one `url.expired`
 * (reason `expired_at`) on the bus and in the worker's event store, none twice, every link
 * claimed; and a visit sent after a link's expiry is never answered 302 (410, or 503 while the
 * database is away and the process does not hold the link). On the embedded bus (SQLite,
 * PostgreSQL) and on NATS JetStream (with PostgreSQL). The built server (`npm run build`).
 */
import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { DatabaseSchema } from '../../src/adapters/storage/schema.js';
import { eventually } from '../helpers/eventually.js';
import { DROP_STORM_MS, FLEET_VARIANTS, useFleet, useFleetReader } from '../helpers/fleet.js';
import { send } from '../helpers/http-client.js';
import { type CreatedByCode, createdInLog, createdInStore, createdInStream } from '../helpers/outbox-census.js';
import { NATS_URL } from '../helpers/services.js';

const LINKS = 100;
/**
 * The first link is due this long after the creates begin (time enough for them on a loaded
 * machine), the others this far apart after it; the fault begins FAULT_LEAD_MS before the first.
 */
const FIRST_DUE_MS = 6_000;
const APART_MS = 20;
const FAULT_LEAD_MS = 1_500;
/** A visit is sent this long after its link's `expires_at`. */
const VISIT_AFTER_MS = 20;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(FLEET_VARIANTS)(
  'links expiring by time while the database fails, three processes, on $name',
  (variant) => {
    const test = it.skipIf(!variant.available);
    // Two API processes and a worker: the worker keeps the event store, and all three sweep.
    const fleet = useFleet(
      variant,
      { RATE_LIMIT_ENABLED: 'false', EVENT_LEASE_MS: '1000', EVENT_POLL_MS: '50', NATS_ACK_WAIT_MS: '3000' },
      { workers: 1, apis: 2 },
    );
    const reader = useFleetReader(variant, fleet);

    test('each link gets one url.expired, in the log and the event store, and no 302 after its expiry', async () => {
      const { apis, natsPrefix, database } = fleet;
      const db = reader.db as unknown as Kysely<DatabaseSchema>;
      // A database of the fleet's own: the codes need no tag to be new.
      const code = (i: number) => `expiry${String(i).padStart(3, '0')}`;
      const start = Date.now();
      const dueAt = (i: number) => start + FIRST_DUE_MS + i * APART_MS;

      // Created before the database fails (eight at a time), each one due in the window of the fault.
      const pending = Array.from({ length: LINKS }, (_, i) => i);
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let i = pending.shift(); i !== undefined; i = pending.shift()) {
            const created = await send(apis[i % 2]!.url, 'POST', '/shorten', {
              body: {
                code: code(i),
                url: `https://example.com/expiring/${i}`,
                created_at: '2024-01-01T00:00:00Z',
                click_count: 0,
                expires_at: new Date(dueAt(i)).toISOString(),
              },
            });
            expect(created.status, created.text).toBe(201);
          }
        }),
      );
      await sleep(dueAt(0) - FAULT_LEAD_MS - Date.now());
      // On a slow machine the creates may run into the links' times: most must still come due in the fault.
      const faultBegins = Date.now();
      const dueInFault = Array.from({ length: LINKS }, (_, i) => dueAt(i)).filter((due) => due > faultBegins).length;
      expect(dueInFault, 'links that come due after the fault begins').toBeGreaterThanOrEqual(LINKS / 2);

      // PostgreSQL: their connections dropped every 40 ms for 6 s, so that sweeps die in flight.
      const fault = fleet.failDatabase(DROP_STORM_MS);
      // One visit to each link just after it expired: half of them through the process that created
      // it (which holds it in its cache), half through the other.
      const after: Record<string, number> = {};
      const visits = Array.from({ length: LINKS }, async (_, i) => {
        await sleep(dueAt(i) + VISIT_AFTER_MS - Date.now());
        const answer = await send(apis[(i + (i >> 1)) % 2]!.url, 'GET', `/${code(i)}`).catch(() => undefined);
        const status = String(answer?.status ?? 'no answer');
        after[status] = (after[status] ?? 0) + 1;
      });
      const [faulted] = await Promise.all([fault, ...visits]);
      console.log(`expiry sweep on ${variant.name}: ${faulted}; visits after expiry ${JSON.stringify(after)}`);
      expect(Object.keys(after).filter((status) => status !== '410' && status !== '503')).toEqual([]);
      expect(after['410'] ?? 0, 'no visit after expiry was answered 410').toBeGreaterThan(0);

      // Every link claimed, and its one event on the bus and in the event store.
      const codes = Array.from({ length: LINKS }, (_, i) => code(i));
      const onTheBus = (): Promise<CreatedByCode> =>
        natsPrefix
          ? createdInStream(NATS_URL, natsPrefix, 'url.expired')
          : createdInLog(database.databaseUrl, 'url.expired');
      const once = (found: CreatedByCode) => codes.filter((c) => found.get(c)?.length !== 1);
      await eventually(
        async () => {
          expect(once(await onTheBus()), 'links without exactly one url.expired on the bus').toEqual([]);
          expect(once(await createdInStore(database.databaseUrl, 'url.expired')), 'in the event store').toEqual([]);
        },
        { timeoutMs: 30_000, intervalMs: 500 },
      );
      const unclaimed = await db
        .selectFrom('url_mappings')
        .select('code')
        .where('code', 'like', 'expiry%')
        .where('expired_event_at', 'is', null)
        .execute();
      expect(unclaimed).toEqual([]);
      // Nothing more arrives once every link is claimed (a sweep that recorded one twice would show).
      await sleep(2_000);
      expect(once(await onTheBus())).toEqual([]);
      expect(once(await createdInStore(database.databaseUrl, 'url.expired'))).toEqual([]);
      const reasons = await db
        .selectFrom('event_store')
        .select('payload')
        .where('event_type', '=', 'url.expired')
        .execute();
      const ours = reasons
        .map((row) => JSON.parse(row.payload) as { code: string; reason: string })
        .filter((payload) => codes.includes(payload.code));
      expect(ours).toHaveLength(LINKS);
      expect(ours.filter((payload) => payload.reason !== 'expired_at')).toEqual([]);
    }, 120_000);
  },
);
