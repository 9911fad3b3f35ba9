import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { bearer, createApiKey, revokeApiKey } from '../helpers/api-keys.js';
import { BACKENDS, sqlite } from '../helpers/backends.js';
import { codeMaker, expectError, newMapping, postShorten, type ReadBody } from '../helpers/http.js';

const ADMIN = { username: 'keylinks_admin', email: 'keylinks_admin@example.com', password: 'admin password 1' };

/**
 * Issue 14 items 1 and 5 together: an API key identifies its user on the URL routes as the session
 * cookie does (`POST /shorten`, `POST /api/v1/links`, `PATCH|DELETE /{code}`, `GET /urls`), with
 * no cookie and so no CSRF token; a revoked key is a 401 there too, never an anonymous request.
 */
describe.each(BACKENDS)('links written with an API key on $name', (backend) => {
  const test = it.skipIf(!backend.available);
  const code = codeMaker('kln');
  const t = useTestApp(backend, {}, { accounts: true, admin: ADMIN });
  const alice = t.user('klalice');
  const bob = t.user('klbob');

  const send = (method: 'PATCH' | 'DELETE' | 'GET' | 'POST', url: string, headers = {}, body?: unknown) =>
    t.app.inject({
      method,
      url,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });

  test('a key owns what it creates; only its user (or an admin) changes it', async () => {
    const aliceKey = (await createApiKey(t.app, alice)).key;
    const bobKey = (await createApiKey(t.app, bob)).key;

    const shortened = await postShorten(t.app, newMapping(code), bearer(aliceKey));
    expect(shortened.statusCode, shortened.body).toBe(201);
    const owned = shortened.json<ReadBody & { owner?: number }>();
    expect(owned.owner).toEqual(expect.any(Number));

    const viaLinks = await send('POST', '/api/v1/links', bearer(aliceKey), { url: 'https://example.com/by-key' });
    expect(viaLinks.statusCode, viaLinks.body).toBe(201);
    expect(viaLinks.json<{ owner?: number }>().owner).toBe(owned.owner);

    // Anonymous: not found; another user's key: forbidden; the owner's key: done, without CSRF.
    expectError(await send('PATCH', `/${owned.code}`, {}, { url: 'https://evil.example' }), 404);
    expectError(await send('PATCH', `/${owned.code}`, bearer(bobKey), { url: 'https://evil.example' }), 403);
    expectError(await send('DELETE', `/${owned.code}`, bearer(bobKey)), 403);
    const patched = await send('PATCH', `/${owned.code}`, bearer(aliceKey), { url: 'https://example.com/moved' });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json<ReadBody>().url).toBe('https://example.com/moved');

    const mine = await send('GET', '/urls?owner=me', bearer(aliceKey));
    expect(mine.statusCode, mine.body).toBe(200);
    expect(mine.json<ReadBody[]>().map((r) => r.code)).toEqual(
      expect.arrayContaining([owned.code, viaLinks.json<ReadBody>().code]),
    );
    const admins = await send('DELETE', `/${viaLinks.json<ReadBody>().code}`, t.admin.headers);
    expect(admins.statusCode, admins.body).toBe(204);
  });

  test('a revoked or unknown key is a 401 on the URL routes, never an anonymous caller', async () => {
    const created = await createApiKey(t.app, alice);
    const revoked = await revokeApiKey(t.app, alice.headers, created.id);
    expect(revoked.statusCode, revoked.body).toBe(204);
    expectError(await postShorten(t.app, newMapping(code), bearer(created.key)), 401, 'Not authenticated');
    expectError(await send('GET', '/urls', bearer(created.key)), 401, 'Not authenticated');
    expectError(await send('GET', '/urls', bearer(`us_${'A'.repeat(43)}`)), 401, 'Not authenticated');
    // Without any credential the spec's anonymous interface is unchanged.
    const anonymous = await postShorten(t.app, newMapping(code));
    expect(anonymous.statusCode, anonymous.body).toBe(201);
    expect(anonymous.json()).not.toHaveProperty('owner');
  });
});

describe('rate limits on the URL routes with a signed-in caller', () => {
  const t = useTestApp(sqlite, { RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_WRITES_LIMIT: '5' }, { accounts: true });
  const carol = t.user('klcarol');
  const dave = t.user('kldave');
  const code = codeMaker('klr');

  it.skipIf(!sqlite.available)("counts a key's writes against its user, whichever key, not the address", async () => {
    const first = await createApiKey(t.app, carol);
    const second = await createApiKey(t.app, carol);
    const other = await createApiKey(t.app, dave);
    // Carol's two key creations were writes of hers (2 of 5): three more are admitted, by any key.
    for (let i = 0; i < 3; i++) {
      const created = await postShorten(t.app, newMapping(code), bearer(first.key));
      expect(created.statusCode, created.body).toBe(201);
    }
    const refused = await postShorten(t.app, newMapping(code), bearer(second.key));
    expectError(refused, 429, 'Rate limit exceeded');
    // Same address, another user (and the cookie session of the first): budgets of their own,
    // and carol's session shares carol's.
    expect((await postShorten(t.app, newMapping(code), bearer(other.key))).statusCode).toBe(201);
    expectError(await postShorten(t.app, newMapping(code), carol.headers), 429, 'Rate limit exceeded');
  });

  it.skipIf(!sqlite.available)('a revoked key is refused with its rate-limit decision taken', async () => {
    const created = await createApiKey(t.app, dave);
    expect((await revokeApiKey(t.app, dave.headers, created.id)).statusCode).toBe(204);
    const refused = await postShorten(t.app, newMapping(code), bearer(created.key));
    expectError(refused, 401, 'Not authenticated');
    expect(refused.headers.ratelimit).toBeDefined();
  });
});
