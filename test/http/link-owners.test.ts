import type { Kysely } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { adminEnv, useTestApp } from '../helpers/app.js';
import { AUTH_TEST_ENV, jsonPost, type Session, signUp } from '../helpers/auth.js';
import { BACKENDS } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { TOPICS } from '../../src/domain/events.js';
import {
  codeMaker,
  createMapping,
  expectError,
  expectRedirect,
  newMapping,
  postShorten,
  type ReadBody,
} from '../helpers/http.js';

const ADMIN = { username: 'owners_admin', email: 'owners_admin@example.com', password: 'admin password 1' };
const NOT_OWNER = 'Only the owner of this link or an administrator may change it';

/**
 * Issue 14 items 1 and 2: a signed-in caller's links are theirs (owner and administrators change
 * them; anonymous callers get 404, other users 403), anonymous links behave as spec §4 says, the
 * owner shows only to the owner and administrators, and LINK_WRITE_POLICY=owned.
 */
describe.each(BACKENDS)('links and their owners on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  const code = codeMaker('own');
  const t = useTestApp(
    backend,
    { ...AUTH_TEST_ENV, ...adminEnv(ADMIN), EVENT_POLL_MS: '50' },
    { accounts: true, admin: ADMIN },
  );
  let alice: { user: { id: number }; session: Session };
  let bob: { user: { id: number }; session: Session };

  beforeAll(async () => {
    if (!backend.available) return;
    alice = await signUp(t.app, 'alice');
    bob = await signUp(t.app, 'bob');
  });

  const send = (method: string, url: string, session?: Session, body?: unknown) =>
    t.app.inject({
      method: method as 'GET',
      url,
      headers: {
        ...(session ? session.headers : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });
  const shortenAs = async (session: Session | undefined, url = 'https://example.com/owned') => {
    const response = await postShorten(t.app, newMapping(code, { url }), session?.headers ?? {});
    expect(response.statusCode, response.body).toBe(201);
    return response.json<ReadBody & { owner?: number }>();
  };
  const listAs = async (session?: Session, query = '') => {
    const response = await send('GET', `/urls${query}`, session);
    expect(response.statusCode, response.body).toBe(200);
    return response.json<Array<ReadBody & { owner?: number }>>();
  };
  const setPolicy = async (policy: 'open' | 'owned') => {
    const response = await send('PATCH', '/api/v1/admin/settings', t.admin, { link_write_policy: policy });
    expect(response.statusCode, response.body).toBe(200);
  };

  test('a signed-in caller owns what it creates, and sees the owner; nobody else does', async () => {
    const created = await shortenAs(alice.session);
    expect(created.owner).toBe(alice.user.id);
    const byCode = (rows: Array<ReadBody & { owner?: number }>) => rows.find((r) => r.code === created.code);
    expect(byCode(await listAs(alice.session))?.owner).toBe(alice.user.id);
    expect(byCode(await listAs(t.admin))?.owner).toBe(alice.user.id);
    expect(byCode(await listAs(bob.session))).not.toHaveProperty('owner');
    expect(byCode(await listAs())).not.toHaveProperty('owner');
    expect(Object.keys(byCode(await listAs())!).sort()).toEqual(['click_count', 'code', 'created_at', 'id', 'url']);
    // A foreign PATCH that is refused answers its detail alone.
    const refused = await send('PATCH', `/${created.code}`, bob.session, { url: 'https://x.example' });
    expect(refused.json()).toEqual({ detail: NOT_OWNER });
  });

  test('an owned link survives an anonymous and a foreign PATCH and DELETE', async () => {
    const created = await shortenAs(alice.session, 'https://example.com/alice');
    const change = { url: 'https://evil.example/' };
    expectError(await send('PATCH', `/${created.code}`, undefined, change), 404, 'URL mapping not found');
    expectError(await send('DELETE', `/${created.code}`), 404, 'URL mapping not found');
    expectError(await send('PATCH', `/${created.code}`, bob.session, change), 403, NOT_OWNER);
    expectError(await send('DELETE', `/${created.code}`, bob.session), 403, NOT_OWNER);
    expectRedirect(await send('GET', `/${created.code}`), 'https://example.com/alice');
  });

  test('the owner and administrators change and delete it', async () => {
    const created = await shortenAs(alice.session, 'https://example.com/a1');
    const byOwner = await send('PATCH', `/${created.code}`, alice.session, { url: 'https://example.com/a2' });
    expect(byOwner.statusCode, byOwner.body).toBe(200);
    expect(byOwner.json()).toMatchObject({ url: 'https://example.com/a2', owner: alice.user.id });
    const byAdmin = await send('PATCH', `/${created.code}`, t.admin, { url: 'https://example.com/a3' });
    expect(byAdmin.statusCode, byAdmin.body).toBe(200);
    expect(byAdmin.json()).toMatchObject({ url: 'https://example.com/a3', owner: alice.user.id });
    expect((await send('DELETE', `/${created.code}`, t.admin)).statusCode).toBe(204);
    const another = await shortenAs(alice.session);
    expect((await send('DELETE', `/${another.code}`, alice.session)).statusCode).toBe(204);
    expectError(await send('GET', `/${another.code}`), 404);
  });

  test('an anonymous link behaves as the spec says: anyone changes and deletes it, no owner shown', async () => {
    const created = await createMapping(t.app, newMapping(code));
    expect(created).not.toHaveProperty('owner');
    const patched = await send('PATCH', `/${created.code}`, undefined, { url: 'https://example.com/anon2' });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toEqual({ ...created, url: 'https://example.com/anon2' });
    const bySignedIn = await send('PATCH', `/${created.code}`, bob.session, { url: 'https://example.com/anon3' });
    expect(bySignedIn.statusCode, bySignedIn.body).toBe(200);
    expect(bySignedIn.json()).not.toHaveProperty('owner');
    expect((await send('DELETE', `/${created.code}`)).statusCode).toBe(204);
    expectError(await send('DELETE', `/${created.code}`), 404);
  });

  test('a URL write with the cookie but no valid CSRF header is anonymous; a dead cookie answers 401', async () => {
    const noHeader = await postShorten(t.app, newMapping(code), { cookie: alice.session.cookie });
    expect(noHeader.statusCode, noHeader.body).toBe(201);
    expect(noHeader.json()).not.toHaveProperty('owner'); // not Alice's: a forged post cannot act as her
    const foreign = await postShorten(t.app, newMapping(code), {
      cookie: alice.session.cookie,
      'x-csrf-token': bob.session.csrfToken,
    });
    expect(foreign.json()).not.toHaveProperty('owner');
    const created = await shortenAs(alice.session);
    const cookieOnly = { ...alice.session, headers: { cookie: alice.session.cookie } };
    expectError(await send('DELETE', `/${created.code}`, cookieOnly), 404);
    expectError(await send('PATCH', `/${created.code}`, cookieOnly, { url: 'https://x.example' }), 404);
    // A dead session: 401 where it would count (a read here).
    const dead = 'access_token=not.a.token; csrf_token=x';
    expectError(await t.app.inject({ method: 'GET', url: '/urls', headers: { cookie: dead } }), 401);
    // The redirect never looks at cookies.
    const followed = await t.app.inject({ method: 'GET', url: `/${created.code}`, headers: { cookie: dead } });
    expect(followed.statusCode).toBe(302);
  });

  test("GET /urls?owner=me lists the caller's own; anonymous callers get 401", async () => {
    const mine = await shortenAs(bob.session, 'https://example.com/bob-only');
    const rows = await listAs(bob.session, '?owner=me');
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((r) => r.owner === bob.user.id)).toBe(true);
    expect(rows.map((r) => r.code)).toContain(mine.code);
    expectError(await send('GET', '/urls?owner=me'), 401, 'Not authenticated');
    expectError(await send('GET', '/urls?owner=you'), 422);
  });

  test('LINK_WRITE_POLICY=owned: creating needs a session, anonymous writes and lists 401, users see their own', async () => {
    const anonymous = await createMapping(t.app, newMapping(code));
    const alices = await shortenAs(alice.session);
    await setPolicy('owned');
    try {
      expectError(await postShorten(t.app, newMapping(code)), 401, 'Not authenticated');
      expectError(await jsonPost(t.app, '/api/v1/links', { url: 'https://example.com/' }), 401, 'Not authenticated');
      expectError(await send('PATCH', `/${anonymous.code}`, undefined, { url: 'https://x.example' }), 401);
      expectError(await send('DELETE', `/${anonymous.code}`), 401);
      expectError(await send('DELETE', `/${alices.code}`), 401);
      expectError(await send('GET', '/urls'), 401);
      // A user: their own links only; someone else's (or an anonymous one) is not theirs to change.
      const bobs = await shortenAs(bob.session);
      const listed = await listAs(bob.session);
      expect(listed.every((r) => r.owner === bob.user.id)).toBe(true);
      expect(listed.map((r) => r.code)).toContain(bobs.code);
      expectError(await send('DELETE', `/${alices.code}`, bob.session), 403, NOT_OWNER);
      expectError(await send('PATCH', `/${anonymous.code}`, bob.session, { url: 'https://x.example' }), 403);
      // An administrator: everything.
      const all = (await listAs(t.admin)).map((r) => r.code);
      expect(all).toEqual(expect.arrayContaining([anonymous.code, alices.code, bobs.code]));
      expect((await send('DELETE', `/${anonymous.code}`, t.admin)).statusCode).toBe(204);
      expectRedirect(await send('GET', `/${alices.code}`), alices.url); // redirects stay open to all
    } finally {
      await setPolicy('open');
    }
    expect((await postShorten(t.app, newMapping(code))).statusCode).toBe(201);
  });

  test('the url.* events carry the owner', async () => {
    const created = await shortenAs(alice.session);
    expect((await send('PATCH', `/${created.code}`, alice.session, { url: 'https://example.com/e2' })).statusCode).toBe(
      200,
    );
    expect((await send('DELETE', `/${created.code}`, alice.session)).statusCode).toBe(204);
    const db = t.service.database.db as unknown as Kysely<EventTables>;
    const payloads = await eventually(async () => {
      const rows = await db.selectFrom('event_store').selectAll().where('topic', '=', TOPICS.url).execute();
      const ours = rows.filter((r) => (JSON.parse(r.payload) as { code?: string }).code === created.code);
      expect(ours.map((r) => r.event_type).sort()).toEqual(['url.created', 'url.deleted', 'url.updated']);
      return Object.fromEntries(ours.map((r) => [r.event_type, JSON.parse(r.payload) as Record<string, unknown>]));
    });
    expect(payloads['url.created']).toMatchObject({ code: created.code, owner: alice.user.id });
    expect(payloads['url.updated']).toMatchObject({ code: created.code, owner: alice.user.id });
    expect(payloads['url.deleted']).toEqual({ id: created.id, code: created.code, owner: alice.user.id });
  });
});
