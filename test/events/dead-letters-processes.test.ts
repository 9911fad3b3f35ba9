/**
 * Dead letters across processes, with the database failing under load. The built service runs
 * as in the distributed mode: an API process, where an admin discards letters and retries others
 * by hand, and two worker processes, which share the dead-letter queue's group, record its
 * letters, keep each one's retry on a timer and sweep for due ones every 5 s. Two publishers of this test put a burst of dead
 * letters on the queue (what consumers in other processes that gave up on an event do) while the
 * database fails under the service (PostgreSQL: its connections dropped, several times; SQLite:
 * another process holds the write lock past the busy timeout), and one worker is killed with
 * SIGKILL once the letters are recorded, its timers with it.
 *
 * The checker counts what was acknowledged against what arrived: every dead letter the bus
 * acknowledged is recorded once; every discard the API answered 200 before the letter was due
 * stands (nothing re-published, the letter `discarded`); every other letter, by hand or by its
 * timer, is re-published (it arrives again at a group of the test that had its original) and ends
 * `retried`, none left waiting. A re-publication may arrive twice where a process died or lost its connection between
 * the publication and the status it writes after it (the letter's claim runs out and it goes
 * again: at least once, which consumers idempotent by event id take as a redelivery); how many is
 * printed. On the embedded bus (SQLite, PostgreSQL) and on NATS JetStream (with PostgreSQL).
 */
import type { Kysely } from 'kysely';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { TOPICS } from '../../src/domain/events.js';
import type { EventBus, Subscription } from '../../src/ports/event-bus.js';
import { adminEnv } from '../helpers/app.js';
import { eventually } from '../helpers/eventually.js';
import { fetchShorten } from '../helpers/http.js';
import { type BrowserSession, send, sessionOf } from '../helpers/http-client.js';
import { connectFleetBus, type FleetBus, FLEET_VARIANTS, useFleet, useFleetReader } from '../helpers/fleet.js';
import { type GivenUp, publishDeadLetter } from '../helpers/dead-letters.js';

const ADMIN = { username: 'dlq_procs_admin', email: 'dlq_procs_admin@example.com', password: 'admin password 1' };
/** Long enough for a discard to land before it even while the database fails. */
const RETRY_DELAY_MS = 8_000;
const LETTERS = 60;
/** The consumer group that "gave up" on the events (in another process). */
const GROUP = 'gave-up-in-another-process';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Original extends GivenUp {
  readonly code: string;
}

describe.each(FLEET_VARIANTS)('dead letters across processes, the database failing, on $name', (variant) => {
  const test = it.skipIf(!variant.available);
  const fleet = useFleet(variant, {
    RATE_LIMIT_ENABLED: 'false',
    DLQ_RETRY_DELAY_MS: String(RETRY_DELAY_MS),
    DLQ_MAX_RETRIES: '3',
    EVENT_LEASE_MS: '1000',
    EVENT_POLL_MS: '50',
    NATS_ACK_WAIT_MS: '3000',
    ...adminEnv(ADMIN),
  });
  /** This test's reading of the tables. */
  const reader = useFleetReader(variant, fleet);
  /** This test's own: two publishers (as two processes would be). */
  let buses: FleetBus[] = [];
  let counting: Subscription | undefined;

  beforeAll(async () => {
    if (variant.available) buses = [await connectFleetBus(fleet), await connectFleetBus(fleet)];
  });

  afterAll(async () => {
    await counting?.close();
    for (const { close } of buses) await close();
  });

  test('each acknowledged letter recorded once, discards before the due time stand, every other letter re-published, by hand or when due', async () => {
    const { api, workers } = fleet;
    const db = reader.db as unknown as Kysely<EventTables>;
    // The originals: url.created events of mappings made through the API, as a group of this
    // test reads them (from the earliest); what it is handed again later is a re-publication.
    const prefix = `dp${variant.nats ? 'n' : variant.backend.name === 'sqlite' ? 's' : 'p'}${randomBytes(2).toString('hex')}`;
    const codes = Array.from({ length: LETTERS }, (_, i) => `${prefix}${String(i).padStart(3, '0')}`);
    const originals = new Map<string, Original>();
    const handed = new Map<string, number>();
    counting = await buses[0]!.bus.subscribe({
      group: `dlqp-count-${randomBytes(3).toString('hex')}`,
      topic: TOPICS.url,
      startAt: 'earliest',
      handler: async (message) => {
        const { envelope } = message;
        handed.set(envelope.event_id, (handed.get(envelope.event_id) ?? 0) + 1);
        const code = (envelope.payload as { code?: string }).code;
        if (envelope.event_type === 'url.created' && code?.startsWith(prefix) && !originals.has(code)) {
          originals.set(code, {
            code,
            envelope,
            headers: message.headers,
            partition: message.partition,
            offset: message.offset,
          });
        }
      },
    });
    for (let i = 0; i < codes.length; i += 10) {
      const answers = await Promise.all(
        codes.slice(i, i + 10).map((code) => fetchShorten(api.url, { code, url: `https://example.com/${code}` })),
      );
      for (const answer of answers) expect(answer.status, await answer.text()).toBe(201);
    }
    await eventually(() => expect(originals.size).toBe(LETTERS), { timeoutMs: 30_000 });
    const login = await send(api.url, 'POST', '/api/v1/auth/login', {
      body: { username: ADMIN.username, password: ADMIN.password },
    });
    const admin = sessionOf(login);
    expect(admin, login.text).toBeDefined();

    // The database fails under the service from now on, for a while.
    const faults = fleet.failDatabase();

    // The burst: every original's dead letter, from two publishers at once.
    const acknowledged = new Map<string, string>(); // dead letter's event id -> original's code
    const publish = async (bus: EventBus, mine: Original[]) => {
      for (const original of mine) {
        // A publication that failed (this test's database connection waits for the lock too)
        // is made again; one acknowledged is the letter the service owes.
        acknowledged.set(await publishDeadLetter(bus, original, GROUP, `refused ${original.code}`), original.code);
      }
    };
    const all = codes.map((code) => originals.get(code)!);
    await Promise.all([
      publish(
        buses[0]!.bus,
        all.filter((_, i) => i % 2 === 0),
      ),
      publish(
        buses[1]!.bus,
        all.filter((_, i) => i % 2 === 1),
      ),
    ]);
    expect(acknowledged.size).toBe(LETTERS);

    // The admin discards every third letter as soon as it shows, and retries another third by
    // hand, each through the API process and again on a 503 through the failures; a discard
    // answered 200 before the letter's due time must stand, and a retry answered 200 leaves the
    // letter `retried` (its re-publication out, not to go again when the letter would have been due).
    const toDiscard = new Set(codes.filter((_, i) => i % 3 === 0));
    const toRetry = new Set(codes.filter((_, i) => i % 3 === 1));
    const discardedInTime = new Set<string>();
    const discardedLate = new Set<string>();
    const retriedByHand = new Set<string>();
    let refusedDecisions = 0;
    const decide = async (code: string, action: 'discard' | 'retry') => {
      for (;;) {
        const row = await letterOf(code).catch(() => undefined);
        if (row) {
          const answer = await send(api.url, 'POST', `/api/v1/admin/dlq/${row.id}/${action}`, {
            session: admin as BrowserSession,
          }).catch(() => undefined);
          if (answer?.status === 200) {
            if (action === 'retry') retriedByHand.add(code);
            else (Date.now() < Number(row.retry_at) ? discardedInTime : discardedLate).add(code);
            return;
          }
          if (answer && answer.status !== 503) throw new Error(`${action} ${code}: ${answer.status} ${answer.text}`);
          if (answer) refusedDecisions++;
        }
        await sleep(50);
      }
    };
    const letterOf = async (code: string) => {
      const eventId = originals.get(code)!.envelope.event_id;
      return db
        .selectFrom('dead_letters')
        .select(['id', 'retry_at', 'status'])
        .where('event_id', '=', eventId)
        .where('group_name', '=', GROUP)
        .executeTakeFirst();
    };
    const decisions = Promise.all([
      ...[...toDiscard].map((code) => decide(code, 'discard')),
      ...[...toRetry].map((code) => decide(code, 'retry')),
    ]);

    // A worker dies once the letters are recorded: its timers go with it; the sweep of the other
    // (and its taking over of the queue's partitions or messages) must make up for them.
    await eventually(
      async () => {
        const { n } = await db
          .selectFrom('dead_letters')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('group_name', '=', GROUP)
          .executeTakeFirstOrThrow();
        expect(Number(n)).toBe(LETTERS);
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    await workers[1]!.stop('SIGKILL');
    await decisions;
    const fault = await faults;
    expect(discardedInTime.size).toBeGreaterThan(LETTERS / 6);

    // Nothing left waiting: every letter ends discarded or retried (a claim that died with its
    // process runs out after 30 s, so this may take that long).
    const rows = await eventually(
      async () => {
        const letters = await db
          .selectFrom('dead_letters')
          .select(['dlq_event_id', 'event_id', 'status'])
          .where('group_name', '=', GROUP)
          .execute();
        expect(letters.filter((l) => l.status === 'retrying' || l.status === 'parked')).toEqual([]);
        return letters;
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    // Recorded once each: exactly the letters acknowledged.
    expect(rows.map((r) => r.dlq_event_id).sort()).toEqual([...acknowledged.keys()].sort());

    const statusOf = new Map(rows.map((r) => [r.event_id, r.status]));
    const eventOf = (code: string) => originals.get(code)!.envelope.event_id;
    const republished = codes.filter((code) => !toDiscard.has(code));
    for (const code of republished) expect(statusOf.get(eventOf(code)), code).toBe('retried');
    // Each re-publication arrives (after its original).
    await eventually(
      () => {
        for (const code of republished) expect(handed.get(eventOf(code)) ?? 0, code).toBeGreaterThanOrEqual(2);
      },
      { timeoutMs: 30_000 },
    );
    // And what was discarded in time never goes out, however long one waits past its due time.
    await sleep(1_500);
    for (const code of discardedInTime) {
      expect(statusOf.get(eventOf(code)), code).toBe('discarded');
      expect(handed.get(eventOf(code)), code).toBe(1);
    }
    for (const code of discardedLate) expect(statusOf.get(eventOf(code)), code).toBe('discarded');

    expect(api.child.exitCode).toBeNull();
    expect(workers[0]!.child.exitCode).toBeNull();
    const twice = republished.filter((code) => (handed.get(eventOf(code)) ?? 0) > 2).length;
    const byHandTwice = [...retriedByHand].filter((code) => (handed.get(eventOf(code)) ?? 0) > 2).length;
    expect(retriedByHand).toEqual(toRetry);
    console.info(
      `${variant.name}, ${fault}, a worker killed: ${acknowledged.size} letters acknowledged and recorded once; ` +
        `${discardedInTime.size} discarded in time (none re-published), ${discardedLate.size} late; ` +
        `${republished.length} re-published (${twice} more than once), of them ${retriedByHand.size} by hand ` +
        `(${byHandTwice} more than once); ${refusedDecisions} decisions answered 503 and sent again`,
    );
    // A graceful stop of what is left.
    expect(await workers[0]!.stop()).toBe(0);
    expect(await api.stop()).toBe(0);
  }, 240_000);
});
