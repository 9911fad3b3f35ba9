import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { sqlite } from '../helpers/backends.js';
import { expectError } from '../helpers/http.js';
import { newUser, registerUser } from '../helpers/auth.js';

const REFUSED = 'Cross-site request refused: sign in, sign up and sign out only from this site';
const HOST = 'short.example:8000';

/**
 * Login CSRF (issue 16): a page on another site must not sign the browser in as the attacker, nor
 * sign it up or out. Login, register and logout skip the token check (spec §5.4 step 2), so they
 * refuse cross-site requests by `Sec-Fetch-Site`, else by `Origin`; non-browser clients send
 * neither and keep working.
 */
describe('cross-site sign-in, sign-up and sign-out', () => {
  const t = useTestApp(sqlite, {}, { accounts: true });
  const account = newUser('xsite');

  const form = (headers: Record<string, string>) =>
    t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      headers: { host: HOST, 'content-type': 'application/x-www-form-urlencoded', ...headers },
      payload: new URLSearchParams({ username: account.username, password: account.password }).toString(),
    });
  const json = (url: string, body: unknown, headers: Record<string, string>) =>
    t.app.inject({
      method: 'POST',
      url,
      headers: { host: HOST, 'content-type': 'application/json', ...headers },
      payload: JSON.stringify(body),
    });

  it('creates the account the tests sign in with', async () => {
    await registerUser(t.app, account);
  });

  it.each([
    [{ 'sec-fetch-site': 'cross-site' }, 'a form on another site (fetch metadata)'],
    [{ 'sec-fetch-site': 'same-site' }, 'a sibling subdomain'],
    [{ 'sec-fetch-site': 'cross-site', origin: `http://${HOST}` }, 'fetch metadata wins over Origin'],
    [{ origin: 'https://evil.example' }, 'another origin (no fetch metadata)'],
    [{ origin: 'https://short.example:8000' }, 'same host, other scheme'],
    [{ origin: 'http://short.example' }, 'same host, other port'],
    [{ origin: 'null' }, 'an opaque origin (sandboxed frame, data: URL)'],
  ] as [Record<string, string>, string][])(
    'refuses a form-encoded login with %o (%s): 403, no cookies',
    async (headers) => {
      const response = await form(headers);
      expectError(response, 403, REFUSED);
      expect(response.headers['set-cookie']).toBeUndefined();
    },
  );

  it.each([
    [{ 'sec-fetch-site': 'same-origin' }, 'the web client'],
    [{ 'sec-fetch-site': 'none' }, 'the user, from the address bar or a bookmark'],
    [{ origin: `http://${HOST}` }, 'the same origin, no fetch metadata'],
    [{}, 'a non-browser client: neither header'],
  ] as [Record<string, string>, string][])('signs in with %o (%s)', async (headers) => {
    const response = await form(headers);
    expect(response.statusCode, response.body).toBe(200);
    expect(response.cookies.map((c) => c.name).sort()).toEqual(['access_token', 'csrf_token']);
  });

  it('compares the origin with the default port written out or not', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      headers: { host: 'short.example:80', origin: 'http://short.example', 'content-type': 'application/json' },
      payload: JSON.stringify({ username: account.username, password: account.password }),
    });
    expect(response.statusCode, response.body).toBe(200);
  });

  it('refuses cross-site sign-up and sign-out the same way, and serves them same-origin', async () => {
    const other = newUser('xsite');
    expectError(await json('/api/v1/auth/register', other, { 'sec-fetch-site': 'cross-site' }), 403, REFUSED);
    expect((await json('/api/v1/auth/register', other, { 'sec-fetch-site': 'same-origin' })).statusCode).toBe(201);
    expectError(await json('/api/v1/auth/logout', {}, { origin: 'https://evil.example' }), 403, REFUSED);
    expect((await json('/api/v1/auth/logout', {}, { origin: `http://${HOST}` })).statusCode).toBe(200);
  });

  it('does not count a refused login as a failed attempt', async () => {
    for (let i = 0; i < 8; i++) {
      const response = await t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/login',
        headers: { host: HOST, 'content-type': 'application/json', 'sec-fetch-site': 'cross-site' },
        payload: JSON.stringify({ username: account.username, password: 'wrong' }),
      });
      expect(response.statusCode).toBe(403);
    }
    expect((await form({})).statusCode).toBe(200);
  });
});
