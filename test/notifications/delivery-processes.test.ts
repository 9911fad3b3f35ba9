/**
 * Notifications across processes, with the database failing under load. The built service runs as
 * in the distributed mode: an API process takes executions from users who each have a webhook
 * channel, and two worker processes run them, fan out one notification per final event and send
 * it. While the executions come in, the database fails under the service (PostgreSQL: its
 * connections dropped seven times; SQLite: another process holds the write lock past the busy
 * timeout), and one worker is killed with SIGKILL.
 *
 * The checker counts what was acknowledged against what arrived: every execution the API answered
 * 202 ends once, and the receiver gets its notification, signed, under one notification id (its
 * `webhook-id`), which is recorded as delivered. A notification may arrive twice where a worker
 * died, or lost its connection, between sending it and recording it (at least once: a receiver
 * deduplicates by `webhook-id`, as Standard Webhooks asks); how many is printed. On the embedded
 * bus (SQLite, PostgreSQL) and on NATS JetStream (with PostgreSQL).
 */
import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { DatabaseSchema } from '../../src/adapters/storage/schema.js';
import { FLEET_VARIANTS, useFleet, useFleetReader } from '../helpers/fleet.js';
import {
  expectEveryExecutionNotified,
  NOTIFYING_FLEET_ENV,
  submitExecutions,
  type Subscriber,
  subscriber,
  useReceiver,
} from './notified.js';

const USERS = 3;
/** Per user; each user's executions go one after another (at most EXECUTION_MAX_PENDING_PER_USER queued). */
const EXECUTIONS = 10;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(FLEET_VARIANTS)('notifications across processes, the database failing, on $name', (variant) => {
  const test = it.skipIf(!variant.available);
  const receiver = useReceiver(variant.available);
  const fleet = useFleet(variant, NOTIFYING_FLEET_ENV);
  const reader = useFleetReader(variant, fleet);

  test('every acknowledged execution ends once and its notification arrives, recorded once', async () => {
    const { api, workers } = fleet;
    const subscribers = await Promise.all(
      Array.from({ length: USERS }, (_, n) => subscriber(api.url, receiver, `ndp${n}`)),
    );

    const faults = fleet.failDatabase();
    // Each user's executions, one after another; refusals (503 while the database fails, 429 at
    // the pending cap) are sent again. What was acknowledged (202) is owed.
    const acknowledged = new Map<string, Subscriber>();
    const refusals = new Map<number, number>();
    const submitting = Promise.all(
      subscribers.map((who) => submitExecutions(api.url, who, EXECUTIONS, acknowledged, refusals)),
    );
    // A worker dies with executions and notifications of its own under way.
    await sleep(2_500);
    await workers[1]!.stop('SIGKILL');
    await submitting;
    const fault = await faults;
    expect(acknowledged.size).toBe(USERS * EXECUTIONS);

    const twice = await expectEveryExecutionNotified(
      reader.db as unknown as Kysely<DatabaseSchema>,
      receiver,
      subscribers,
      acknowledged,
    );

    expect(api.child.exitCode).toBeNull();
    expect(workers[0]!.child.exitCode).toBeNull();
    console.info(
      `${variant.name}, ${fault}, a worker killed: ${acknowledged.size} executions acknowledged ` +
        `(refused meanwhile: ${JSON.stringify(Object.fromEntries(refusals))}), each ended once with one ` +
        `notification, delivered and recorded; ${twice} arrived more than once`,
    );
    expect(await workers[0]!.stop()).toBe(0);
    expect(await api.stop()).toBe(0);
  }, 240_000);
});
