import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { API_KEYS, bearer, createApiKey, meByKey, revokeApiKey } from '../helpers/api-keys.js';
import { metricValue, signUp } from '../helpers/auth.js';
import { BACKENDS, sqlite } from '../helpers/backends.js';
import { expectError } from '../helpers/http.js';

const ADMIN = { username: 'keys_admin', email: 'keys_admin@example.com', password: 'admin password 1' };

describe.each(BACKENDS)('API keys on $name', (backend) => {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  // Every line the service writes, at the most verbose level: keys must appear in none.
  const t = useTestApp(backend, {}, { accounts: true, admin: ADMIN, logger: { level: 'trace', stream } });
  const alice = t.user('keyalice');
  const bob = t.user('keybob');

  it.skipIf(!backend.available)('creates a key shown once: us_ and 256 random bits, listed without it', async () => {
    const created = await createApiKey(t.app, alice, { name: 'deploy script' });
    expect(created.key).toMatch(/^us_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(created.key.slice(3), 'base64url')).toHaveLength(32);
    expect(created).toMatchObject({ name: 'deploy script', last_used_at: null, expires_at: null, revoked_at: null });
    expect(created.key.startsWith(created.prefix)).toBe(true);
    expect(created.prefix).toHaveLength(11);

    const listed = await t.app.inject({ method: 'GET', url: API_KEYS, headers: { cookie: alice.cookie } });
    expect(listed.statusCode).toBe(200);
    const { key: _key, ...withoutKey } = created;
    expect(listed.json()).toContainEqual(withoutKey);
    expect(listed.body).not.toContain(created.key);
    // Bob sees none of Alice's keys.
    const bobs = await t.app.inject({ method: 'GET', url: API_KEYS, headers: { cookie: bob.cookie } });
    expect(bobs.json()).toEqual([]);
  });

  it.skipIf(!backend.available)('a key authenticates as its user; a wrong or malformed one is 401', async () => {
    const { key } = await createApiKey(t.app, alice);
    const me = await meByKey(t.app, key);
    expect(me.statusCode, me.body).toBe(200);
    const byCookie = (
      await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: { cookie: alice.cookie } })
    ).json();
    expect(me.json()).toEqual({ ...byCookie, csrf_token: '' });
    expect(me.headers['set-cookie']).toBeUndefined();
    const forged = `us_${'A'.repeat(43)}`;
    expectError(await meByKey(t.app, forged), 401, 'Not authenticated');
    expectError(await meByKey(t.app, key.slice(0, -1)), 401, 'Not authenticated');
    expectError(
      await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: { authorization: `Basic ${key}` } }),
      401,
    );
    // A bad bearer is no session, even with a good cookie beside it.
    expectError(
      await t.app.inject({
        method: 'GET',
        url: '/api/v1/auth/me',
        headers: { ...bearer(forged), cookie: alice.cookie },
      }),
      401,
    );
  });

  it.skipIf(!backend.available)(
    'a 401 names the Bearer scheme; a refused key is invalid_token (RFC 6750)',
    async () => {
      const forged = `us_${'B'.repeat(43)}`;
      const anonymous = await t.app.inject({ method: 'GET', url: '/api/v1/auth/me' });
      expectError(anonymous, 401, 'Not authenticated');
      expect(anonymous.headers['www-authenticate']).toBe('Bearer realm="urlshortener"');
      const refused = [
        await meByKey(t.app, forged),
        // The URL routes identify their caller themselves: the same answer there.
        await t.app.inject({ method: 'DELETE', url: '/nosuchcode', headers: bearer(forged) }),
      ];
      for (const answer of refused) {
        expectError(answer, 401, 'Not authenticated');
        expect(answer.headers['www-authenticate']).toBe('Bearer realm="urlshortener", error="invalid_token"');
      }
      const { key } = await createApiKey(t.app, alice);
      expect((await meByKey(t.app, key)).headers['www-authenticate']).toBeUndefined();
    },
  );

  it.skipIf(!backend.available)('bearer requests need no CSRF token; with a session cookie they still do', async () => {
    const { key } = await createApiKey(t.app, alice);
    const before = await metricValue(t.app, 'csrf_failures_total', { reason: 'missing_header' });
    const byKey = await t.app.inject({
      method: 'POST',
      url: API_KEYS,
      headers: { ...bearer(key), 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'made by a key' }),
    });
    expect(byKey.statusCode, byKey.body).toBe(201);
    const withCookie = await t.app.inject({
      method: 'POST',
      url: API_KEYS,
      headers: { ...bearer(key), cookie: alice.cookie, 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'cookie too' }),
    });
    expectError(withCookie, 403, 'CSRF token missing from X-CSRF-Token header');
    expect(await metricValue(t.app, 'csrf_failures_total', { reason: 'missing_header' })).toBe(before + 1);
  });

  it.skipIf(!backend.available)(
    'a key has its user rights: admin routes are 403 for a user key, 200 for an admin key',
    async () => {
      const userKey = await createApiKey(t.app, alice);
      const adminKey = await createApiKey(t.app, t.admin);
      const settings = (key: string) =>
        t.app.inject({ method: 'GET', url: '/api/v1/admin/settings', headers: bearer(key) });
      expectError(await settings(userKey.key), 403, 'Admin privileges required');
      expect((await settings(adminKey.key)).statusCode).toBe(200);
    },
  );

  it.skipIf(!backend.available)('revoked: 401 at once; only the owner can revoke (404 for others)', async () => {
    const created = await createApiKey(t.app, alice);
    expectError(await revokeApiKey(t.app, bob.headers, created.id), 404, 'API key not found');
    expect((await meByKey(t.app, created.key)).statusCode).toBe(200);
    // Revoked with the key itself, no CSRF.
    const revoked = await revokeApiKey(t.app, bearer(created.key), created.id);
    expect(revoked.statusCode, revoked.body).toBe(204);
    expectError(await meByKey(t.app, created.key), 401, 'Not authenticated');
    expect((await revokeApiKey(t.app, alice.headers, created.id)).statusCode).toBe(204);
    const listed = await t.app.inject({ method: 'GET', url: API_KEYS, headers: { cookie: alice.cookie } });
    expect(
      listed.json<{ id: number; revoked_at: string | null }[]>().find((k) => k.id === created.id)?.revoked_at,
    ).toEqual(expect.any(String));
  });

  it.skipIf(!backend.available)('expires at expires_at; an expiry in the past is refused', async () => {
    const expiresAt = new Date(t.clock.now() + 3_600_000).toISOString();
    const created = await createApiKey(t.app, alice, { name: 'an hour', expires_at: expiresAt });
    expect(Date.parse(created.expires_at!)).toBe(Date.parse(expiresAt));
    expect((await meByKey(t.app, created.key)).statusCode).toBe(200);
    t.clock.advance(3_600_000);
    expectError(await meByKey(t.app, created.key), 401, 'Not authenticated');
    const past = await t.app.inject({
      method: 'POST',
      url: API_KEYS,
      headers: { ...alice.headers, 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'past', expires_at: new Date(t.clock.now() - 1000).toISOString() }),
    });
    expectError(past, 422, "'expires_at' must be in the future");
  });

  it.skipIf(!backend.available)('last_used_at is written at most once a minute', async () => {
    const created = await createApiKey(t.app, alice);
    const lastUsed = async () => {
      const listed = await t.app.inject({ method: 'GET', url: API_KEYS, headers: { cookie: alice.cookie } });
      return listed.json<{ id: number; last_used_at: string | null }[]>().find((k) => k.id === created.id)!
        .last_used_at;
    };
    await meByKey(t.app, created.key);
    const first = await lastUsed();
    expect(first).not.toBeNull();
    t.clock.advance(30_000);
    await meByKey(t.app, created.key);
    expect(await lastUsed()).toBe(first);
    t.clock.advance(30_000);
    await meByKey(t.app, created.key);
    expect(Date.parse((await lastUsed())!)).toBe(Date.parse(first!) + 60_000);
  });

  it.skipIf(!backend.available)('validates the body: a name is required', async () => {
    for (const body of [{}, { name: '' }, { name: 'x'.repeat(101) }, { name: 'ok', extra: 1 }]) {
      const response = await t.app.inject({
        method: 'POST',
        url: API_KEYS,
        headers: { ...alice.headers, 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
      expectError(response, 422);
    }
    expectError(await t.app.inject({ method: 'GET', url: API_KEYS }), 401, 'Not authenticated');
  });

  it.skipIf(!backend.available)('keys never appear in the logs, in successes or in failures', async () => {
    const { session } = await signUp(t.app, 'keylogs');
    const created = await createApiKey(t.app, session);
    await meByKey(t.app, created.key);
    await meByKey(t.app, `${created.key.slice(0, -2)}xx`);
    await t.app.inject({
      method: 'POST',
      url: API_KEYS,
      headers: { ...bearer(created.key), 'content-type': 'application/json' },
      payload: '{bad json',
    });
    await t.app.inject({ method: 'GET', url: `/api/v1/auth/me?key=x`, headers: bearer(created.key) });
    expect(lines.length).toBeGreaterThan(0);
    const text = lines.join('');
    expect(text).not.toContain(created.key);
    expect(text).not.toContain(created.key.slice(3));
  });
});

describe('API keys and rate limits', () => {
  const t = useTestApp(sqlite, { RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_DEFAULT_LIMIT: '3' }, { accounts: true });
  const carol = t.user('keycarol');
  const dave = t.user('keydave');

  it.skipIf(!sqlite.available)("counts a key's requests against its user, whichever key, not the address", async () => {
    const first = await createApiKey(t.app, carol);
    const second = await createApiKey(t.app, carol);
    const other = await createApiKey(t.app, dave);
    const list = (key: string) => t.app.inject({ method: 'GET', url: API_KEYS, headers: bearer(key) });
    for (let i = 0; i < 3; i++) expect((await list(first.key)).statusCode).toBe(200);
    const refused = await list(second.key);
    expectError(refused, 429, 'Rate limit exceeded');
    expect(refused.headers['retry-after']).toBeDefined();
    // Same address, another user: a budget of its own.
    expect((await list(other.key)).statusCode).toBe(200);
  });
});
