/**
 * The per-user limit on notification channels (NOTIFICATION_MAX_CHANNELS_PER_USER) across
 * processes, with the database failing under load. Two API processes share one database. Half the
 * users create channels through both, twelve requests in flight, paced so that they reach their
 * limit while the database fails under them (PostgreSQL: the processes' connections dropped
 * every 350 ms for 7 s; SQLite: another process holds the write lock past the busy timeout); once it is back, the
 * other half send three times their limit at once, through both processes.
 *
 * The checker counts what was acknowledged against what was stored, each creation known by its
 * channel's name: no user ever has more channels than the limit; every channel answered 201 is
 * stored; a stored channel that was not answered 201 is one whose answer was a 503 or never came
 * (a commit whose answer was lost); a user refused with 409 holds exactly the limit; every answer
 * is a 201, 409 or 503 with a `{detail}`. After the failure each process refuses one more, and a
 * delete through one process makes room for one channel through the other.
 */
import { describe, expect, it } from 'vitest';
import { FLEET_VARIANTS, useFleet, useFleetReader } from '../helpers/fleet.js';
import { type BrowserSession, isDetailBody, newSignedInAccount, send } from '../helpers/http-client.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const MAX = 40;
const USERS = 6;
const LOOPS = 12;
/** Between one loop's creations: the paced users' 120 channels come over about 7 s, the failure's time. */
const PACE_MS = 600;
/**
 * PostgreSQL: the fleet's connections dropped every 350 ms for 7 s: often enough that creations
 * die in flight, not so often that none gets through meanwhile (every 40 ms, none did).
 */
const DROPS_MS: readonly number[] = Array.from({ length: 20 }, () => 350);
const PATH = '/api/v1/notifications/channels';
const DETAIL = `A user may have at most ${MAX} notification channels; delete one first`;

interface User {
  readonly n: number;
  readonly id: number;
  readonly session: BrowserSession;
}

interface Creation {
  readonly user: User;
  readonly name: string;
  readonly process: number;
  readonly status: number | null;
  readonly text: string;
  /** When the answer came (ms since the epoch). */
  readonly at: number;
}

const VARIANTS = FLEET_VARIANTS.filter((variant) => !variant.nats);

describe.each(VARIANTS)('channels per user across two API processes, the database failing, on $name', (variant) => {
  const test = it.skipIf(!variant.available);
  const fleet = useFleet(
    variant,
    {
      RATE_LIMIT_ENABLED: 'false',
      NOTIFICATIONS_ALLOW_PRIVATE: 'true',
      NOTIFICATION_MAX_CHANNELS_PER_USER: String(MAX),
      BCRYPT_ROUNDS: '4',
      NODE_ENV: 'test',
    },
    { workers: 0, apis: 2 },
  );
  const reader = useFleetReader(variant, fleet);

  test('no user passes the limit; every acknowledged channel is stored, and only answered or lost ones', async () => {
    const bases = fleet.apis.map((p) => p.url) as [string, string];
    const [a, b] = bases;
    const user = async (n: number): Promise<User> => {
      const { session } = await newSignedInAccount(a, `chl${n}`, b);
      const me = await send(a, 'GET', '/api/v1/auth/me', { session });
      return { n, id: me.json<{ id: number }>().id, session };
    };
    const users = await Promise.all(Array.from({ length: USERS }, (_, n) => user(n)));

    const creations: Creation[] = [];
    const create = async (u: User, name: string, process: number): Promise<Creation> => {
      let answer: { status: number | null; text: string };
      try {
        const sent = await send(bases[process]!, 'POST', PATH, {
          body: { type: 'chat', name, url: `http://127.0.0.1:9/${name}` },
          session: u.session,
        });
        answer = { status: sent.status, text: sent.text };
      } catch (error) {
        answer = { status: null, text: String(error) };
      }
      const creation = { user: u, name, process, ...answer, at: Date.now() };
      creations.push(creation);
      return creation;
    };

    // Half the users, paced, so that they reach their limits while the database fails, not before.
    const paced = users.slice(0, USERS / 2);
    let loading = true;
    const loop = async (w: number) => {
      for (let i = 0; loading; i++) {
        await create(paced[(i + w) % paced.length]!, `l${w}-${i}`, (i + w) % 2);
        await sleep(PACE_MS);
      }
    };
    const load = Promise.all(Array.from({ length: LOOPS }, (_, w) => loop(w)));
    const fault = await fleet.failDatabase(DROPS_MS);
    const recoveredAt = creations.length;
    // The other half, once the database is back: three times their limit each, all at once,
    // through both processes.
    await Promise.all(
      users.slice(USERS / 2).flatMap((u) => Array.from({ length: 3 * MAX }, (_, i) => create(u, `b${i}`, i % 2))),
    );
    // Until each paced user has been refused once the database was back: each then holds the limit.
    const refusedAfter = () =>
      new Set(creations.slice(recoveredAt).flatMap((c) => (c.status === 409 ? [c.user.n] : []))).size;
    for (const deadline = Date.now() + 30_000; refusedAfter() < USERS && Date.now() < deadline;) await sleep(100);
    loading = false;
    await load;

    const stored = await reader.db
      .selectFrom('notification_channels')
      .select(['user_id', 'name'])
      .where(
        'user_id',
        'in',
        users.map((u) => u.id),
      )
      .execute();
    const statuses: Record<string, number> = {};
    for (const c of creations) statuses[String(c.status)] = (statuses[String(c.status)] ?? 0) + 1;
    const firstRefused = Math.min(...creations.filter((c) => c.status === 503).map((c) => c.at));
    const acknowledgedSince = creations
      .slice(0, recoveredAt)
      .filter((c) => c.status === 201 && c.at > firstRefused).length;
    console.log(
      `${variant.name}: ${creations.length} creations (${JSON.stringify(statuses)}), ` +
        `${acknowledgedSince} acknowledged between the first 503 and the database's return; ${fault}`,
    );

    const unexpected = creations
      .filter((c) => c.status === null || ![201, 409, 503].includes(c.status))
      .map((c) => `${c.name} → ${c.status ?? 'no answer'}: ${c.text.slice(0, 200)}`);
    const malformed = creations
      .filter((c) => c.status !== null && c.status >= 400 && !isDetailBody(c.text))
      .map((c) => `${c.name} → ${c.status}: ${c.text.slice(0, 200)}`);
    const wrongDetail = creations
      .filter((c) => c.status === 409 && JSON.parse(c.text).detail !== DETAIL)
      .map((c) => `${c.name}: ${c.text.slice(0, 200)}`);
    expect(unexpected, 'answers other than 201, 409 or 503').toEqual([]);
    expect(malformed, 'error answers that are not {detail}').toEqual([]);
    expect(wrongDetail, '409s that do not name the limit').toEqual([]);
    expect(statuses['503'] ?? 0, 'the database failed under the load').toBeGreaterThan(0);
    // The failure came while the users were still short of their limits, not after.
    expect(acknowledgedSince, 'channels acknowledged after the database first failed').toBeGreaterThan(0);

    for (const u of users) {
      const mine = creations.filter((c) => c.user === u);
      const names = new Set(stored.filter((row) => Number(row.user_id) === u.id).map((row) => row.name));
      const acknowledged = mine.filter((c) => c.status === 201).map((c) => c.name);
      const unsure = new Set(mine.filter((c) => c.status === 503 || c.status === null).map((c) => c.name));
      expect(names.size, `user ${u.n}'s channels`).toBe(MAX);
      expect(
        acknowledged.filter((name) => !names.has(name)),
        `user ${u.n}: acknowledged, not stored`,
      ).toEqual([]);
      expect(
        [...names].filter((name) => !acknowledged.includes(name) && !unsure.has(name)),
        `user ${u.n}: stored, but answered 409 or never asked for`,
      ).toEqual([]);
    }

    // Each process refuses one more; a delete through one makes room for one through the other.
    const u = users[0]!;
    for (const [process, base] of bases.entries()) {
      const refused = await create(u, `after${process}`, process);
      expect(refused.status, `${base}: ${refused.text}`).toBe(409);
    }
    const listed = await send(a, 'GET', PATH, { session: u.session });
    const [first] = listed.json<{ id: string }[]>();
    expect((await send(a, 'DELETE', `${PATH}/${first!.id}`, { session: u.session })).status).toBe(204);
    expect((await create(u, 'room', 1)).status).toBe(201);
    expect((await create(u, 'no-room', 0)).status).toBe(409);
  }, 120_000);
});
