/**
 * What the process suites check of executions and their notifications: a user with a webhook
 * channel to a path of the test's receiver, and the checker that counts what was acknowledged
 * (executions answered 202) against what arrived (final states, notifications, deliveries recorded,
 * final events stored).
 */
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, expect } from 'vitest';
import type { DatabaseSchema } from '../../src/adapters/storage/schema.js';
import { eventually } from '../helpers/eventually.js';
import { type BrowserSession, newSignedInAccount, send } from '../helpers/http-client.js';
import { Receiver, verifyStandardWebhook } from './receiver.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const FINAL = new Set(['completed', 'failed', 'timed_out']);
const FINAL_EVENTS = ['execution.completed', 'execution.failed', 'execution.timed_out'];

/**
 * What a fleet that runs and notifies executions is started with: webhooks to the test's receiver
 * on 127.0.0.1 allowed, the bus's and the executor's redeliveries quick.
 */
export const NOTIFYING_FLEET_ENV = {
  RATE_LIMIT_ENABLED: 'false',
  NOTIFICATIONS_ALLOW_PRIVATE: 'true',
  EVENT_LEASE_MS: '1000',
  EVENT_POLL_MS: '50',
  NATS_ACK_WAIT_MS: '3000',
  EXECUTION_ACK_WAIT_MS: '3000',
} as const;

/** A receiver of webhooks listening for the suite this is called in (when `available`). */
export function useReceiver(available: boolean): Receiver {
  const receiver = new Receiver();
  beforeAll(async () => {
    if (available) await receiver.listen();
  });
  afterAll(async () => {
    if (available) await receiver.close();
  });
  return receiver;
}

export interface Subscriber {
  readonly session: BrowserSession;
  readonly path: string;
  readonly secret: string;
}

/** A new user of the service at `api` (named from `prefix`), with a webhook channel to a path of `receiver` of its own. */
export async function subscriber(api: string, receiver: Receiver, prefix: string): Promise<Subscriber> {
  const { account, session } = await newSignedInAccount(api, prefix);
  const path = `/hook-${account.username}`;
  const channel = await send(api, 'POST', '/api/v1/notifications/channels', {
    body: { type: 'webhook', name: 'receiver', url: `${receiver.url}${path}` },
    session,
  });
  expect(channel.status, channel.text).toBe(201);
  return { session, path, secret: channel.json<{ secret: string }>().secret };
}

/**
 * `count` executions of `who`'s at `api`, one after another; a refusal (503, 429 at the pending
 * cap, no answer) is counted in `refusals` by status (0: none) and sent again. What was
 * acknowledged (202) is owed: it goes into `acknowledged`.
 */
export async function submitExecutions(
  api: string,
  who: Subscriber,
  count: number,
  acknowledged: Map<string, Subscriber>,
  refusals: Map<number, number>,
): Promise<void> {
  for (let i = 0; i < count;) {
    const answer = await send(api, 'POST', '/execute', {
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
}

/**
 * Every execution of `acknowledged` (id → its owner) ends once; its notification arrives at its
 * owner's path only, signed, under one notification id, which is recorded as delivered; its final
 * event is stored once. How many notifications arrived more than once (at least once is the
 * promise: a receiver deduplicates by `webhook-id`).
 */
export async function expectEveryExecutionNotified(
  db: Kysely<DatabaseSchema>,
  receiver: Receiver,
  subscribers: readonly Subscriber[],
  acknowledged: ReadonlyMap<string, Subscriber>,
): Promise<number> {
  const ids = [...acknowledged.keys()];
  await eventually(
    async () => {
      const rows = await db.selectFrom('executions').select(['id', 'status']).where('id', 'in', ids).execute();
      expect(rows.filter((r) => !FINAL.has(r.status)).map((r) => `${r.id} ${r.status}`)).toEqual([]);
      expect(rows).toHaveLength(ids.length);
    },
    { timeoutMs: 90_000, intervalMs: 250 },
  );

  const executionOf = (body: string) => (JSON.parse(body) as { data: { execution_id: string } }).data.execution_id;
  const arrivals = () => {
    const byExecution = new Map<string, { ids: Set<string>; times: number }>();
    for (const { path, secret } of subscribers) {
      for (const request of receiver.to(path)) {
        expect(verifyStandardWebhook(secret, request.headers, request.body)).toBe(true);
        const executionId = executionOf(request.body);
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
    for (const request of receiver.to(path)) expect(acknowledged.get(executionOf(request.body))!.path).toBe(path);
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
        .where('event_type', 'in', FINAL_EVENTS)
        .where('execution_id', 'in', ids)
        .execute();
      const counts = new Map<string, number>();
      for (const { execution_id: id } of finals) counts.set(id!, (counts.get(id!) ?? 0) + 1);
      expect(ids.filter((id) => counts.get(id) !== 1).map((id) => `${id}: ${counts.get(id) ?? 0}`)).toEqual([]);
    },
    { timeoutMs: 30_000 },
  );
  return [...arrived.values()].filter(({ times }) => times > 1).length;
}
