/**
 * A worker process joining its consumer groups under load while the database fails. Two API
 * processes take links from eight writers at once; the one worker stores their events
 * (`event-store`). A second worker starts while the writes go on, and the database fails under
 * the whole fleet right after it is up (PostgreSQL: its connections dropped every 40 ms for 6 s;
 * SQLite: another process holds the write lock 6 s): on the embedded bus the first worker hands
 * the joining one its share of the partitions, each once what it had in the handler is committed
 * (src/adapters/event-bus/embedded-log/group-leases.ts), while both meet the failing database.
 *
 * The checker counts what was acknowledged against what arrived: every link answered 201 has its
 * `url.created` stored once; every other answer is a 503; both workers still run; and on the
 * embedded bus the joining worker holds part of the event store's partitions, so no partition was
 * left with the worker that was handing it over. On the embedded bus on SQLite and on PostgreSQL,
 * and on NATS JetStream (whose members share each partition's consumer instead). The built server
 * (`npm run build`).
 */
import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { DatabaseSchema } from '../../src/adapters/storage/schema.js';
import { TOPICS } from '../../src/domain/events.js';
import { storedCreatedByCode } from '../helpers/event-store.js';
import { eventually } from '../helpers/eventually.js';
import { DROP_STORM_MS, FLEET_VARIANTS, useFleet, useFleetReader } from '../helpers/fleet.js';
import { CENSUS_ENV, census, postCode } from '../helpers/outbox-census.js';

const WRITERS = 8;
const JOIN_ENV = { ...CENSUS_ENV, EVENT_LEASE_MS: '1000', EVENT_POLL_MS: '50', NATS_ACK_WAIT_MS: '3000' };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** WRITERS writers creating links through `apis` in turn until `stop()`: the codes answered 201, and the other answers by status. */
function writers(apis: readonly string[]) {
  const acknowledged: string[] = [];
  const refused = new Map<string, number>();
  let running = true;
  let next = 0;
  const writer = async () => {
    while (running) {
      const n = next++;
      const code = `wj${String(n).padStart(7, '0')}`;
      let status: string;
      try {
        status = String((await postCode(apis[n % apis.length]!, code)).status);
      } catch (error) {
        status = `error: ${(error as Error).message}`;
      }
      if (status === '201') acknowledged.push(code);
      else refused.set(status, (refused.get(status) ?? 0) + 1);
    }
  };
  const done = Promise.all(Array.from({ length: WRITERS }, writer));
  return {
    stop: async () => {
      running = false;
      await done;
      return { acknowledged, refused };
    },
  };
}

describe.each(FLEET_VARIANTS)('a worker joining under load while the database fails, on $name', (variant) => {
  const test = it.skipIf(!variant.available);
  const fleet = useFleet(variant, JOIN_ENV, { workers: 1, apis: 2 });
  const reader = useFleetReader(variant, fleet);

  test('every acknowledged link has its url.created stored once, and the joining worker takes its share', async () => {
    const db = reader.db as unknown as Kysely<DatabaseSchema>;
    const load = writers(fleet.apis.map((api) => api.url));
    await sleep(1_000);
    const joined = await fleet.addWorker();
    const faulted = await fleet.failDatabase(variant.backend.name === 'postgres' ? DROP_STORM_MS : undefined);
    await sleep(1_000);
    const { acknowledged, refused } = await load.stop();

    expect(
      [...refused.keys()].filter((status) => status !== '503'),
      JSON.stringify([...refused]),
    ).toEqual([]);
    expect(acknowledged.length).toBeGreaterThan(0);
    const counted = await eventually(
      async () => {
        const found = census(acknowledged, await storedCreatedByCode(db));
        expect(found.missing.slice(0, 5), `${found.missing.length} acknowledged links without a stored event`).toEqual(
          [],
        );
        return found;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    expect(counted.duplicated).toEqual([]);
    for (const worker of [...fleet.workers, joined]) expect(worker.child.exitCode).toBeNull();
    let handover = '';
    if (!variant.nats) {
      // Both processes' members of the event store on the links' topic hold leases: the first gave
      // the joining one its share. Their rounds (every lease period) failed with the database, so
      // the handover may still be under way when every event is stored: ten lease periods for it.
      const since = performance.now();
      await eventually(
        async () => {
          const owners = await db
            .selectFrom('consumer_leases')
            .select('owner')
            .distinct()
            .where('group_name', '=', 'event-store')
            .where('topic', '=', TOPICS.url)
            .where('owner', '!=', '')
            .execute();
          expect(owners).toHaveLength(2);
        },
        { timeoutMs: 10 * Number(JOIN_ENV.EVENT_LEASE_MS), intervalMs: 100 },
      );
      handover = ` (both workers held leases ${(performance.now() - since).toFixed(0)} ms after every event was stored)`;
    }
    console.log(
      `worker joined on ${variant.name}: ${faulted}; ${acknowledged.length} links acknowledged, ` +
        `${refused.get('503') ?? 0} refused (503), every event stored once${handover}`,
    );
  }, 120_000);
});
