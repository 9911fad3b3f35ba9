/**
 * The worker's consumers while the worker alone is cut off from PostgreSQL. Two API processes
 * reach the database directly; the one worker (the event store, the executor, the notifier, the
 * dead-letter manager) reaches it through a proxy that the test cuts for 6 s (every connection
 * closed, every new one reset) while two writers, one on each API process, create links as fast
 * as they are answered, two users submit executions to be run and notified, and a publisher of
 * the test's (a consumer in another process that gave up) puts dead letters on the bus. Nothing of the
 * APIs is refused: the events pile up for the worker, on the embedded bus in the log (which the
 * worker cannot read either) and on NATS JetStream in the stream (which it can: only its writes
 * fail, and what it was handed must be handed again, not acknowledged).
 *
 * The checker counts what was acknowledged against what arrived: every link answered 201 has its
 * `url.created` stored once, and nothing else is; every execution answered 202 ends once, its
 * notification arrives under one id and is recorded, its final event stored once; every dead
 * letter the bus acknowledged is recorded once (parked: DLQ_MAX_RETRIES=0, so that nothing is
 * re-published into the links' events) and stored once as an event; the worker is still running. On the embedded bus and on NATS JetStream, both on PostgreSQL (a proxy can only
 * stand before a server). The built server (`npm run build`).
 */
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseSchema } from '../../src/adapters/storage/schema.js';
import { createEvent, EVENT_TYPES, TOPICS } from '../../src/domain/events.js';
import { publishDeadLetter } from '../helpers/dead-letters.js';
import { storedCreatedByCode } from '../helpers/event-store.js';
import { eventually } from '../helpers/eventually.js';
import { connectFleetBus, type FleetBus, FLEET_VARIANTS, useFleet, useFleetReader } from '../helpers/fleet.js';
import { send } from '../helpers/http-client.js';
import {
  expectEveryExecutionNotified,
  NOTIFYING_FLEET_ENV,
  submitExecutions,
  type Subscriber,
  subscriber,
  useReceiver,
} from '../notifications/notified.js';

const CUT_MS = 6_000;
const USERS = 2;
/** Per user, submitted while the worker is cut off (under EXECUTION_MAX_PENDING_PER_USER: none is refused). */
const EXECUTIONS = 5;
/** Dead letters published while the worker is cut off. */
const LETTERS = 20;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Creates links through `api` until `stop()` says so; the codes answered 201 (any other answer fails the test). */
function writer(api: string, tag: string): { stop: () => Promise<string[]> } {
  const created: string[] = [];
  let running = true;
  const done = (async () => {
    for (let i = 0; running; i++) {
      const code = `${tag}${String(i).padStart(5, '0')}`;
      const answer = await send(api, 'POST', '/shorten', {
        body: { code, url: `https://example.com/${code}`, created_at: '2024-01-01T00:00:00Z', click_count: 0 },
      });
      if (answer.status !== 201) throw new Error(`POST /shorten ${code}: ${answer.status} ${answer.text}`);
      created.push(code);
    }
  })();
  // stop() rethrows a refusal; until then it is not an unhandled rejection of its own.
  done.catch(() => undefined);
  return {
    stop: async () => {
      running = false;
      await done;
      return created;
    },
  };
}

const VARIANTS = FLEET_VARIANTS.filter((variant) => variant.backend.name === 'postgres');

describe.each(VARIANTS)('a worker cut off from PostgreSQL while the API processes go on, on $name', (variant) => {
  const test = it.skipIf(!variant.available);
  const receiver = useReceiver(variant.available);
  // DB_CONNECT_TIMEOUT_MS stays at its default: the cut resets connections at once, and under CI's
  // load a new connection to a healthy server took past 500 ms, which refused an API's first link.
  const fleet = useFleet(
    variant,
    { ...NOTIFYING_FLEET_ENV, DLQ_MAX_RETRIES: '0' },
    { workers: 1, apis: 2, workersBehindProxy: true },
  );
  const reader = useFleetReader(variant, fleet);
  let publisher: FleetBus | undefined;
  beforeAll(async () => {
    if (variant.available) publisher = await connectFleetBus(fleet);
  });
  afterAll(async () => {
    await publisher?.close();
  });

  /** LETTERS dead letters, one after another, each for an event of its own; their event ids. */
  async function deadLetters(): Promise<string[]> {
    const letters: string[] = [];
    for (let i = 0; i < LETTERS; i++) {
      const code = `wcutdl${String(i).padStart(2, '0')}`;
      const original = createEvent(
        EVENT_TYPES.urlCreated,
        { code, url: `https://example.com/${code}` },
        { service: 'gave-up', topic: TOPICS.url, key: code },
      );
      const given = { envelope: original.envelope, headers: { event_type: 'url.created' }, partition: 0, offset: i };
      letters.push(await publishDeadLetter(publisher!.bus, given, 'gave-up-elsewhere', `refused ${code}`));
    }
    return letters;
  }

  test('every acknowledged link, execution, notification and dead letter is stored, run, sent and recorded once it can reach the database again', async () => {
    const { apis, workers, workerProxy } = fleet;
    const [a, b] = apis.map((api) => api.url) as [string, string];
    const db = reader.db as unknown as Kysely<DatabaseSchema>;
    const subscribers = await Promise.all(Array.from({ length: USERS }, (_, n) => subscriber(b, receiver, `wcut${n}`)));

    const writers = [writer(a, 'wcuta'), writer(b, 'wcutb')];
    await sleep(1_000);
    await workerProxy!.refuse();
    const acknowledged = new Map<string, Subscriber>();
    const refusals = new Map<number, number>();
    const [letters] = await Promise.all([
      deadLetters(),
      sleep(CUT_MS),
      ...subscribers.map((who) => submitExecutions(a, who, EXECUTIONS, acknowledged, refusals)),
    ]);
    await workerProxy!.pass();
    const passedAt = Date.now();
    await sleep(1_000);
    const created = (await Promise.all(writers.map((w) => w.stop()))).flat();
    expect(refusals, 'executions refused while only the worker was cut off').toEqual(new Map());

    // Every acknowledged link's url.created stored once, and no other.
    const stored = await eventually(
      async () => {
        const byCode = await storedCreatedByCode(db);
        expect(
          created.filter((code) => !byCode.has(code)),
          'links without their url.created',
        ).toEqual([]);
        return byCode;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const caughtUpMs = Date.now() - passedAt;
    const acknowledgedCodes = new Set(created);
    expect(
      [...stored.keys()].filter((code) => !acknowledgedCodes.has(code)),
      'stored, never acknowledged',
    ).toEqual([]);
    expect(
      [...stored].filter(([, ids]) => ids.length !== 1).map(([code, ids]) => `${code}: ${ids.join(', ')}`),
      'stored more than once',
    ).toEqual([]);

    const twice = await expectEveryExecutionNotified(db, receiver, subscribers, acknowledged);

    // Every acknowledged dead letter recorded once, parked, and stored once as an event.
    await eventually(
      async () => {
        const recorded = await db
          .selectFrom('dead_letters')
          .select(['dlq_event_id', 'status'])
          .where('dlq_event_id', 'in', letters)
          .execute();
        expect(recorded.map((r) => `${r.dlq_event_id} ${r.status}`).sort()).toEqual(
          letters.map((id) => `${id} parked`).sort(),
        );
        const stored = await db.selectFrom('event_store').select('event_id').where('event_id', 'in', letters).execute();
        expect(stored.map((r) => r.event_id).sort()).toEqual([...letters].sort());
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    expect(workers[0]!.child.exitCode, 'the worker exited').toBeNull();
    console.info(
      `worker cut off on ${variant.name}: ${created.length} links and ${acknowledged.size} executions acknowledged ` +
        `and ${letters.length} dead letters published meanwhile; the event store held every url.created ${caughtUpMs} ms after the worker reached the ` +
        `database again; every execution ran and was notified (${twice} notifications arrived more than once), every letter recorded`,
    );
    expect(await workers[0]!.stop()).toBe(0);
  }, 180_000);
});
