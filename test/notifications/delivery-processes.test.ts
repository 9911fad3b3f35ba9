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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseSchema } from '../../src/adapters/storage/schema.js';
import { eventually } from '../helpers/eventually.js';
import { FLEET_VARIANTS, useFleet, useFleetReader } from '../helpers/fleet.js';
import { type BrowserSession, newAccount, send, sessionOf } from '../helpers/http-client.js';
import { Receiver, verifyStandardWebhook } from './receiver.js';

const USERS = 3;
/** Per user; each user's executions go one after another (at most EXECUTION_MAX_PENDING_PER_USER queued). */
const EXECUTIONS = 10;
const FINAL = new Set(['completed', 'failed', 'timed_out']);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Subscriber {
  readonly session: BrowserSession;
  readonly path: string;
  readonly secret: string;
}

describe.each(FLEET_VARIANTS)('notifications across processes, the database failing, on $name', (variant) => {
  const test = it.skipIf(!variant.available);
  const receiver = new Receiver();
  beforeAll(async () => {
    if (variant.available) await receiver.listen();
  });
  afterAll(async () => {
    if (variant.available) await receiver.close();
  });
  const fleet = useFleet(variant, {
    RATE_LIMIT_ENABLED: 'false',
    NOTIFICATIONS_ALLOW_PRIVATE: 'true',
    EVENT_LEASE_MS: '1000',
    EVENT_POLL_MS: '50',
    NATS_ACK_WAIT_MS: '3000',
    EXECUTION_ACK_WAIT_MS: '3000',
  });
  const reader = useFleetReader(variant, fleet);

  /** A user of the service with a webhook channel to a path of the receiver of its own. */
  async function subscriber(api: string, n: number): Promise<Subscriber> {
    const account = newAccount(`ndp${n}`);
    const registered = await send(api, 'POST', '/api/v1/auth/register', { body: account });
    expect(registered.status, registered.text).toBe(201);
    const login = await send(api, 'POST', '/api/v1/auth/login', {
      body: { username: account.username, password: account.password },
    });
    const session = sessionOf(login)!;
    expect(session, login.text).toBeDefined();
    const path = `/hook-${account.username}`;
    const channel = await send(api, 'POST', '/api/v1/notifications/channels', {
      body: { type: 'webhook', name: 'receiver', url: `${receiver.url}${path}` },
      session,
    });
    expect(channel.status, channel.text).toBe(201);
    return { session, path, secret: channel.json<{ secret: string }>().secret };
  }

  test('every acknowledged execution ends once and its notification arrives, recorded once', async () => {
    const { api, workers } = fleet;
    const db = reader.db as unknown as Kysely<DatabaseSchema>;
    const subscribers = await Promise.all(Array.from({ length: USERS }, (_, n) => subscriber(api.url, n)));

    const faults = fleet.failDatabase();
    // Each user's executions, one after another; refusals (503 while the database fails, 429 at
    // the pending cap) are sent again. What was acknowledged (202) is owed.
    const acknowledged = new Map<string, Subscriber>();
    const refusals = new Map<number, number>();
    const submit = async (who: Subscriber) => {
      for (let i = 0; i < EXECUTIONS;) {
        const answer = await send(api.url, 'POST', '/execute', {
          body: { language: 'javascript', script: `console.log(${i}); ${i} * 7` },
          session: who.session,
        }).catch(() => undefined);
        if (answer?.status === 202) {
          acknowledged.set(answer.json<{ execution_id: string }>().execution_id, who);
          i++;
          continue;
        }
        if (answer && answer.status !== 503 && answer.status !== 429) {
          throw new Error(`POST /execute: ${answer.status} ${answer.text}`);
        }
        refusals.set(answer?.status ?? 0, (refusals.get(answer?.status ?? 0) ?? 0) + 1);
        await sleep(100);
      }
    };
    const submitting = Promise.all(subscribers.map(submit));
    // A worker dies with executions and notifications of its own under way.
    await sleep(2_500);
    await workers[1]!.stop('SIGKILL');
    await submitting;
    const fault = await faults;
    expect(acknowledged.size).toBe(USERS * EXECUTIONS);

    // Every acknowledged execution ends, once.
    const ids = [...acknowledged.keys()];
    await eventually(
      async () => {
        const rows = await db.selectFrom('executions').select(['id', 'status']).where('id', 'in', ids).execute();
        expect(rows.filter((r) => !FINAL.has(r.status)).map((r) => `${r.id} ${r.status}`)).toEqual([]);
        expect(rows).toHaveLength(ids.length);
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    );

    // Its notification arrives at its owner's receiver, signed, under one notification id.
    const arrivals = () => {
      const byExecution = new Map<string, { ids: Set<string>; times: number }>();
      for (const { path, secret } of subscribers) {
        for (const request of receiver.to(path)) {
          expect(verifyStandardWebhook(secret, request.headers, request.body)).toBe(true);
          const executionId = (JSON.parse(request.body) as { data: { execution_id: string } }).data.execution_id;
          const entry = byExecution.get(executionId) ?? { ids: new Set<string>(), times: 0 };
          entry.ids.add(String(request.headers['webhook-id']));
          entry.times++;
          byExecution.set(executionId, entry);
        }
      }
      return byExecution;
    };
    const arrived = await eventually(
      () => {
        const byExecution = arrivals();
        expect(ids.filter((id) => !byExecution.has(id))).toEqual([]);
        return byExecution;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    // To the owner's path only, and only for executions that were submitted.
    for (const [id, { ids: notificationIds }] of arrived) {
      expect(acknowledged.has(id), `a notification for ${id}, never acknowledged`).toBe(true);
      expect([...notificationIds], `notification ids of ${id}`).toHaveLength(1);
    }
    for (const { path } of subscribers) {
      for (const request of receiver.to(path)) {
        const executionId = (JSON.parse(request.body) as { data: { execution_id: string } }).data.execution_id;
        expect(acknowledged.get(executionId)!.path).toBe(path);
      }
    }
    // Recorded as delivered, once each.
    const notificationIds = [...arrived.values()].map(({ ids: n }) => [...n][0]!);
    await eventually(
      async () => {
        const delivered = await db
          .selectFrom('notification_deliveries')
          .select('notification_id')
          .where('notification_id', 'in', notificationIds)
          .execute();
        expect(delivered.map((d) => d.notification_id).sort()).toEqual([...notificationIds].sort());
      },
      { timeoutMs: 30_000 },
    );

    // One final event each, in the event store (the notification's cause).
    await eventually(
      async () => {
        const finals = await db
          .selectFrom('event_store')
          .select('execution_id')
          .where('event_type', 'in', ['execution.completed', 'execution.failed', 'execution.timed_out'])
          .where('execution_id', 'in', ids)
          .execute();
        const counts = new Map<string, number>();
        for (const { execution_id: id } of finals) counts.set(id!, (counts.get(id!) ?? 0) + 1);
        expect(ids.filter((id) => counts.get(id) !== 1).map((id) => `${id}: ${counts.get(id) ?? 0}`)).toEqual([]);
      },
      { timeoutMs: 30_000 },
    );

    expect(api.child.exitCode).toBeNull();
    expect(workers[0]!.child.exitCode).toBeNull();
    const twice = [...arrived.values()].filter(({ times }) => times > 1).length;
    console.info(
      `${variant.name}, ${fault}, a worker killed: ${acknowledged.size} executions acknowledged ` +
        `(refused meanwhile: ${JSON.stringify(Object.fromEntries(refusals))}), each ended once with one ` +
        `notification, delivered and recorded; ${twice} arrived more than once`,
    );
    expect(await workers[0]!.stop()).toBe(0);
    expect(await api.stop()).toBe(0);
  }, 240_000);
});
