import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { bearer, createApiKey, meByKey } from '../helpers/api-keys.js';
import { login, loginRequest, me, newUser, registerUser, type Session } from '../helpers/auth.js';
import { BACKENDS } from '../helpers/backends.js';
import { expectError, nextLink } from '../helpers/http.js';

const USERS = '/api/v1/admin/users';
const ADMIN = { username: 'users_admin', email: 'users_admin@example.com', password: 'admin password 1' };

interface AdminUser {
  id: number;
  username: string;
  email: string;
  role: 'user' | 'admin';
  disabled: boolean;
  locked: boolean;
}

/** User administration: list and search, roles, disabling, unlocking, the last administrator. */
describe.each(BACKENDS)('/api/v1/admin/users on $name', (backend) => {
  const t = useTestApp(backend, {}, { accounts: true, admin: ADMIN });
  const admin = t.admin;

  const get = (url: string, headers: Record<string, string> = { cookie: admin.cookie }) =>
    t.app.inject({ method: 'GET', url, headers });
  const patch = (id: number, body: unknown, session: Session = admin) =>
    t.app.inject({
      method: 'PATCH',
      url: `${USERS}/${id}`,
      headers: { ...session.headers, 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });
  const unlock = (id: number, session: Session = admin) =>
    t.app.inject({ method: 'POST', url: `${USERS}/${id}/unlock`, headers: session.headers });
  const account = async (prefix = 'adm') => {
    const body = newUser(prefix);
    const user = await registerUser(t.app, body);
    return { ...body, id: user.id };
  };
  const adminId = async () => (await me(t.app, admin.cookie)).json<{ id: number }>().id;

  it.skipIf(!backend.available)('401 without a session, 403 for a user, on every route', async () => {
    expectError(await get(USERS, {}), 401, 'Not authenticated');
    const user = await account();
    const session = await login(t.app, user.username, user.password);
    expectError(await get(USERS, { cookie: session.cookie }), 403, 'Admin privileges required');
    expectError(await patch(user.id, { role: 'admin' }, session), 403, 'Admin privileges required');
    expectError(await unlock(user.id, session), 403, 'Admin privileges required');
  });

  it.skipIf(!backend.available)('lists users by id in pages with a Link header, and searches them', async () => {
    const made = [await account('pgx'), await account('pgx'), await account('pgx')];
    const first = await get(`${USERS}?q=PGX&limit=2`);
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json<AdminUser[]>().map((u) => u.id)).toEqual([made[0]!.id, made[1]!.id]);
    expect(first.json<AdminUser[]>()[0]).toEqual({
      id: made[0]!.id,
      username: made[0]!.username,
      email: made[0]!.email,
      role: 'user',
      disabled: false,
      locked: false,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const next = nextLink(first)!;
    expect(next).toBe(`${USERS}?q=PGX&limit=2&after=${made[1]!.id}`);
    const second = await get(next);
    expect(second.json<AdminUser[]>().map((u) => u.id)).toEqual([made[2]!.id]);
    expect(second.headers.link).toBeUndefined();
    // By email too.
    const byEmail = await get(`${USERS}?q=${encodeURIComponent(made[2]!.email)}`);
    expect(byEmail.json<AdminUser[]>().map((u) => u.id)).toEqual([made[2]!.id]);
    expectError(await get(`${USERS}?limit=0`), 422);
    expectError(await get(`${USERS}/987654321`), 404, 'User not found');
  });

  it.skipIf(!backend.available)('changes a role: the new rights apply on the next request', async () => {
    const user = await account();
    const session = await login(t.app, user.username, user.password);
    const promoted = await patch(user.id, { role: 'admin' });
    expect(promoted.statusCode, promoted.body).toBe(200);
    expect(promoted.json()).toMatchObject({ id: user.id, role: 'admin' });
    expect((await get(USERS, { cookie: session.cookie })).statusCode).toBe(200);
    expect((await patch(user.id, { role: 'user' })).json()).toMatchObject({ role: 'user' });
    expectError(await get(USERS, { cookie: session.cookie }), 403);
    expectError(await patch(user.id, { role: 'root' }), 422);
  });

  it.skipIf(!backend.available)(
    'a disabled user is refused at once (session and API key); enabled, keys come back, sessions do not',
    async () => {
      const user = await account();
      const session = await login(t.app, user.username, user.password);
      const { key } = await createApiKey(t.app, session);
      t.clock.advance(1000);
      expect((await patch(user.id, { disabled: true })).json()).toMatchObject({ disabled: true });
      expectError(await me(t.app, session.cookie), 401, 'Not authenticated');
      expectError(await meByKey(t.app, key), 401, 'Not authenticated');
      expectError(await loginRequest(t.app, user.username, user.password), 403, 'Account disabled');
      // A wrong password still says only that.
      expectError(await loginRequest(t.app, user.username, 'wrong password!'), 401, 'Invalid username or password');
      t.clock.advance(1000);
      expect((await patch(user.id, { disabled: false })).json()).toMatchObject({ disabled: false });
      // The session open when the account was disabled stays ended; the API key works again.
      expectError(await me(t.app, session.cookie), 401, 'Not authenticated');
      expect((await meByKey(t.app, key)).statusCode).toBe(200);
      const fresh = await login(t.app, user.username, user.password);
      expect((await me(t.app, fresh.cookie)).statusCode).toBe(200);
    },
  );

  it.skipIf(!backend.available)(
    'the last administrator can be neither demoted nor disabled (409), even by themselves',
    async () => {
      const id = await adminId();
      expectError(await patch(id, { role: 'user' }), 409, 'Cannot remove the last administrator');
      expectError(await patch(id, { disabled: true }), 409, 'Cannot remove the last administrator');
      // With a second admin, one may go; then the other is the last.
      const second = await account('second');
      await patch(second.id, { role: 'admin' });
      const secondSession = await login(t.app, second.username, second.password);
      expect((await patch(second.id, { disabled: true })).statusCode).toBe(200);
      expectError(await patch(id, { role: 'user' }), 409);
      expect((await patch(second.id, { disabled: false })).statusCode).toBe(200);
      const demoted = await patch(second.id, { role: 'user' }, secondSession);
      expect(demoted.statusCode, demoted.body).toBe(200);
      expect((await me(t.app, admin.cookie)).json()).toMatchObject({ role: 'admin' });
    },
  );

  it.skipIf(!backend.available)('unlock lifts a lockout at once', async () => {
    const user = await account();
    for (let i = 0; i < 5; i++) await loginRequest(t.app, user.username, 'wrong password!');
    expectError(await loginRequest(t.app, user.username, user.password), 423);
    expect((await get(`${USERS}/${user.id}`)).json()).toMatchObject({ locked: true });
    const unlocked = await unlock(user.id);
    expect(unlocked.statusCode, unlocked.body).toBe(200);
    expect(unlocked.json()).toMatchObject({ id: user.id, locked: false });
    await login(t.app, user.username, user.password);
    expectError(await unlock(987_654_321), 404, 'User not found');
  });

  it.skipIf(!backend.available)('an admin API key manages users without CSRF', async () => {
    const { key } = await createApiKey(t.app, admin);
    const user = await account();
    const response = await t.app.inject({
      method: 'PATCH',
      url: `${USERS}/${user.id}`,
      headers: { ...bearer(key), 'content-type': 'application/json' },
      payload: JSON.stringify({ disabled: true }),
    });
    expect(response.statusCode, response.body).toBe(200);
  });
});
