import { createHmac } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { BACKENDS, sqlite } from '../helpers/backends.js';
import { expectError, postShorten } from '../helpers/http.js';
import { jsonPost, login, loginRequest, me, newUser, registerUser, sessionFrom, signUp } from '../helpers/auth.js';

const SECRET_KEY = 'session-suite-secret-key-0123456789abcdef';

const b64 = (value: unknown) =>
  Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
const sign = (body: string, key: string, algorithm = 'sha256') =>
  createHmac(algorithm, key).update(body).digest('base64url');
const decode = (segment: string): Record<string, unknown> =>
  JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));

/** A token of our shape: header and claims as given, signed with `key` (HS256 unless told). */
function forge(header: unknown, claims: unknown, key: string, algorithm = 'sha256'): string {
  const body = `${b64(header)}.${b64(claims)}`;
  return `${body}.${sign(body, key, algorithm)}`;
}

/** Each attribute of a `Set-Cookie` line for `name`, lower-cased keys. */
function cookieLine(
  response: LightMyRequestResponse,
  name: string,
): { value: string; attributes: Map<string, string> } {
  const header = response.headers['set-cookie'];
  const lines = Array.isArray(header) ? header : header === undefined ? [] : [header];
  const line = lines.find((l) => l.startsWith(`${name}=`));
  expect(line, `Set-Cookie for ${name}`).toBeDefined();
  const [pair, ...rest] = line!.split(';').map((part) => part.trim());
  const attributes = new Map(
    rest.map((part) => {
      const [key, ...value] = part.split('=');
      return [key!.toLowerCase(), value.join('=')] as const;
    }),
  );
  return { value: pair!.slice(name.length + 1), attributes };
}

function expectSessionCookieAttributes(response: LightMyRequestResponse, maxAge: number): void {
  const access = cookieLine(response, 'access_token');
  expect([...access.attributes.keys()].sort()).toEqual(['httponly', 'max-age', 'path', 'samesite', 'secure']);
  expect(access.attributes.get('max-age')).toBe(String(maxAge));
  expect(access.attributes.get('path')).toBe('/');
  expect(access.attributes.get('samesite')).toBe('Strict');
  const csrf = cookieLine(response, 'csrf_token');
  // Readable by scripts: no HttpOnly; otherwise the same.
  expect([...csrf.attributes.keys()].sort()).toEqual(['max-age', 'path', 'samesite', 'secure']);
  expect(csrf.attributes.get('max-age')).toBe(String(maxAge));
  expect(csrf.attributes.get('path')).toBe('/');
  expect(csrf.attributes.get('samesite')).toBe('Strict');
}

describe.each(BACKENDS)('sessions on $name', (backend) => {
  const t = useTestApp(backend, { SECRET_KEY }, { accounts: true });

  describe('POST /api/v1/auth/login', () => {
    it.skipIf(!backend.available)(
      'JSON: 200 {id, username, email, role, csrf_token} and both cookies of §5.2',
      async () => {
        const body = newUser('lj');
        const user = await registerUser(t.app, body);
        const response = await loginRequest(t.app, body.username, body.password);
        expect(response.statusCode, response.body).toBe(200);
        const session = sessionFrom(response);
        expect(response.json()).toEqual({
          id: user.id,
          username: body.username,
          email: body.email,
          role: 'user',
          csrf_token: session.csrfToken,
        });
        expectSessionCookieAttributes(response, 1440 * 60);
      },
    );

    it.skipIf(!backend.available)('OAuth2 password form: the same answer and cookies', async () => {
      const body = newUser('lf');
      await registerUser(t.app, body);
      const response = await t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/login',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({
          grant_type: 'password',
          username: body.username,
          password: body.password,
          scope: '',
        }).toString(),
      });
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toMatchObject({ username: body.username, role: 'user' });
      expectSessionCookieAttributes(response, 1440 * 60);
      const form = (payload: string) =>
        t.app.inject({
          method: 'POST',
          url: '/api/v1/auth/login',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload,
        });
      expectError(await form(`grant_type=client_credentials&username=${body.username}&password=x`), 422, /grant_type/);
      expectError(await form(`username=${body.username}`), 422, /password/);
    });

    it.skipIf(!backend.available)(
      '401 `Invalid username or password` for a wrong password and for an unknown user alike',
      async () => {
        const body = newUser('lw');
        await registerUser(t.app, body);
        const wrong = await loginRequest(t.app, body.username, 'not the password');
        const unknown = await loginRequest(t.app, `${body.username}nobody`, body.password);
        expectError(wrong, 401, 'Invalid username or password');
        expectError(unknown, 401, 'Invalid username or password');
        expect(wrong.headers['set-cookie']).toBeUndefined();
        // Usernames are case-sensitive at login.
        expectError(
          await loginRequest(t.app, body.username.toUpperCase(), body.password),
          401,
          'Invalid username or password',
        );
      },
    );

    it.skipIf(!backend.available)('422 for a malformed body, 415 for other media types', async () => {
      expectError(await jsonPost(t.app, '/api/v1/auth/login', { username: 'someone' }), 422, /password/);
      expectError(
        await jsonPost(t.app, '/api/v1/auth/login', { username: 'a', password: 'b', extra: 1 }),
        422,
        /extra/,
      );
      const text = await t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/login',
        headers: { 'content-type': 'text/plain' },
        payload: 'username=a',
      });
      expectError(text, 415);
    });

    it.skipIf(!backend.available)('each login gets a new token and a new CSRF token', async () => {
      const { user, password, session } = await signUp(t.app, 'ln');
      const again = await login(t.app, user.username, password);
      expect(again.accessToken).not.toBe(session.accessToken);
      expect(again.csrfToken).not.toBe(session.csrfToken);
    });
  });

  describe('tokens (§5.3)', () => {
    it.skipIf(!backend.available)(
      'are HS256 JWTs with sub, exp, iat, jti, uid, role; lifetime 1440 minutes',
      async () => {
        const { user, session } = await signUp(t.app, 'tk');
        const [header, payload, signature] = session.accessToken.split('.');
        expect(decode(header!)).toEqual({ alg: 'HS256', typ: 'JWT' });
        const claims = decode(payload!);
        expect(claims).toEqual({
          sub: user.username,
          exp: expect.any(Number),
          iat: expect.any(Number),
          jti: expect.any(String),
          uid: user.id,
          role: 'user',
        });
        expect(Number(claims.exp) - Number(claims.iat)).toBe(1440 * 60);
        expect(Math.abs(Number(claims.iat) - t.clock.now() / 1000)).toBeLessThanOrEqual(1);
        // Signed with SECRET_KEY.
        expect(signature).toBe(sign(`${header}.${payload}`, SECRET_KEY));
      },
    );

    it.skipIf(!backend.available)(
      'a genuine token authenticates GET /me: 200 {id, username, email, role, csrf_token}',
      async () => {
        const { user, session } = await signUp(t.app, 'me');
        const response = await me(t.app, session.cookie);
        expect(response.statusCode, response.body).toBe(200);
        expect(response.json()).toEqual({
          id: user.id,
          username: user.username,
          email: user.email,
          role: 'user',
          csrf_token: session.csrfToken,
        });
        expect(response.headers['set-cookie']).toBeUndefined();
      },
    );

    it.skipIf(!backend.available)('GET /me without a session: 401 `Not authenticated`', async () => {
      expectError(await t.app.inject({ method: 'GET', url: '/api/v1/auth/me' }), 401, 'Not authenticated');
      expectError(await me(t.app, 'access_token='), 401, 'Not authenticated');
      expectError(await me(t.app, 'access_token=garbage'), 401, 'Not authenticated');
      expectError(await me(t.app, 'access_token=a.b.c'), 401, 'Not authenticated');
    });

    it.skipIf(!backend.available)('GET /me gives a fresh CSRF token (and cookie) when the cookie is lost', async () => {
      const { session } = await signUp(t.app, 'mc');
      const response = await me(t.app, `access_token=${session.accessToken}`);
      expect(response.statusCode, response.body).toBe(200);
      const renewed = cookieLine(response, 'csrf_token');
      expect(response.json<{ csrf_token: string }>().csrf_token).toBe(renewed.value);
      expect(renewed.value).not.toBe(session.csrfToken);
      expect(renewed.attributes.has('httponly')).toBe(false);
      expect(renewed.attributes.get('samesite')).toBe('Strict');
    });

    describe('forged or unusable tokens answer 401', () => {
      const claimsOf = (token: string) => decode(token.split('.')[1]!);

      it.skipIf(!backend.available)('alg: none (unsigned, or with a signature)', async () => {
        const { session } = await signUp(t.app, 'fn');
        const claims = claimsOf(session.accessToken);
        const none = `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`;
        expectError(await me(t.app, `access_token=${none}`), 401, 'Not authenticated');
        const noneSigned = forge({ alg: 'none', typ: 'JWT' }, claims, SECRET_KEY);
        expectError(await me(t.app, `access_token=${noneSigned}`), 401, 'Not authenticated');
        const noneUpper = `${b64({ alg: 'NONE' })}.${b64(claims)}.`;
        expectError(await me(t.app, `access_token=${noneUpper}`), 401, 'Not authenticated');
      });

      it.skipIf(!backend.available)('another key', async () => {
        const { session } = await signUp(t.app, 'fk');
        const foreign = forge(
          { alg: 'HS256', typ: 'JWT' },
          claimsOf(session.accessToken),
          'some-other-secret-key-0123456789abcdef',
        );
        expectError(await me(t.app, `access_token=${foreign}`), 401, 'Not authenticated');
      });

      it.skipIf(!backend.available)('another algorithm, even with the right key', async () => {
        const { session } = await signUp(t.app, 'fa');
        const claims = claimsOf(session.accessToken);
        const hs512 = forge({ alg: 'HS512', typ: 'JWT' }, claims, SECRET_KEY, 'sha512');
        expectError(await me(t.app, `access_token=${hs512}`), 401, 'Not authenticated');
        const withKid = forge({ alg: 'HS256', typ: 'JWT', kid: '1' }, claims, SECRET_KEY);
        expectError(await me(t.app, `access_token=${withKid}`), 401, 'Not authenticated');
      });

      it.skipIf(!backend.available)('a changed payload (role, sub or exp) under the original signature', async () => {
        const { session } = await signUp(t.app, 'fp');
        const [header, payload, signature] = session.accessToken.split('.');
        const claims = decode(payload!);
        for (const change of [{ role: 'admin' }, { sub: 'root_admin' }, { exp: Number(claims.exp) + 3600 }]) {
          const tampered = `${header}.${b64({ ...claims, ...change })}.${signature}`;
          expectError(await me(t.app, `access_token=${tampered}`), 401, 'Not authenticated');
        }
        // The untouched token still works.
        expect((await me(t.app, session.cookie)).statusCode).toBe(200);
      });

      it.skipIf(!backend.available)('expired: valid until exp, 401 from exp on', async () => {
        const { session } = await signUp(t.app, 'fe');
        const exp = Number(claimsOf(session.accessToken).exp);
        t.clock.advance(exp * 1000 - t.clock.now() - 1000);
        expect((await me(t.app, session.cookie)).statusCode).toBe(200);
        t.clock.advance(1000);
        expectError(await me(t.app, session.cookie), 401, 'Not authenticated');
      });

      it.skipIf(!backend.available)('expired though correctly signed, or issued in the future', async () => {
        const { session } = await signUp(t.app, 'fx');
        const claims = claimsOf(session.accessToken);
        const now = Math.floor(t.clock.now() / 1000);
        const expired = forge(
          { alg: 'HS256', typ: 'JWT' },
          { ...claims, iat: now - 7200, exp: now - 3600 },
          SECRET_KEY,
        );
        expectError(await me(t.app, `access_token=${expired}`), 401, 'Not authenticated');
        const future = forge({ alg: 'HS256', typ: 'JWT' }, { ...claims, iat: now + 3600, exp: now + 7200 }, SECRET_KEY);
        expectError(await me(t.app, `access_token=${future}`), 401, 'Not authenticated');
        const missingJti = forge({ alg: 'HS256', typ: 'JWT' }, { ...claims, jti: undefined }, SECRET_KEY);
        expectError(await me(t.app, `access_token=${missingJti}`), 401, 'Not authenticated');
      });
    });
  });

  describe('POST /api/v1/auth/logout', () => {
    it.skipIf(!backend.available)(
      'revokes the token, clears both cookies (Max-Age=0, same attributes), answers 200',
      async () => {
        const { session } = await signUp(t.app, 'lo');
        // Logout skips CSRF validation (spec §4.3): no X-CSRF-Token needed.
        const response = await t.app.inject({
          method: 'POST',
          url: '/api/v1/auth/logout',
          headers: { cookie: session.cookie },
        });
        expect(response.statusCode, response.body).toBe(200);
        expect(response.json()).toEqual({ message: 'Logged out' });
        const access = cookieLine(response, 'access_token');
        const csrf = cookieLine(response, 'csrf_token');
        expect(access.value).toBe('');
        expect(csrf.value).toBe('');
        expect(Object.fromEntries(access.attributes)).toEqual({
          'max-age': '0',
          path: '/',
          httponly: '',
          secure: '',
          samesite: 'Strict',
        });
        expect(Object.fromEntries(csrf.attributes)).toEqual({
          'max-age': '0',
          path: '/',
          secure: '',
          samesite: 'Strict',
        });
        // The token itself is dead, even if a client kept it.
        expectError(await me(t.app, session.cookie), 401, 'Not authenticated');
      },
    );

    it.skipIf(!backend.available)('revokes only that session', async () => {
      const { user, password, session } = await signUp(t.app, 'l2');
      const other = await login(t.app, user.username, password);
      await t.app.inject({ method: 'POST', url: '/api/v1/auth/logout', headers: { cookie: session.cookie } });
      expectError(await me(t.app, session.cookie), 401);
      expect((await me(t.app, other.cookie)).statusCode).toBe(200);
      // A new login works after logout.
      expect((await me(t.app, (await login(t.app, user.username, password)).cookie)).statusCode).toBe(200);
    });

    it.skipIf(!backend.available)('answers 200 without a session, and again after logging out', async () => {
      const first = await t.app.inject({ method: 'POST', url: '/api/v1/auth/logout' });
      expect(first.statusCode, first.body).toBe(200);
      expect(cookieLine(first, 'access_token').attributes.get('max-age')).toBe('0');
      const { session } = await signUp(t.app, 'l3');
      for (let i = 0; i < 2; i++) {
        const response = await t.app.inject({
          method: 'POST',
          url: '/api/v1/auth/logout',
          headers: { cookie: session.cookie },
        });
        expect(response.statusCode).toBe(200);
      }
    });
  });
});

describe('ACCESS_TOKEN_EXPIRE_MINUTES', () => {
  const t = useTestApp(sqlite, { ACCESS_TOKEN_EXPIRE_MINUTES: '30' }, { accounts: true });

  it("sets the token lifetime and both cookies' Max-Age", async () => {
    const body = newUser('ttl');
    await registerUser(t.app, body);
    const response = await loginRequest(t.app, body.username, body.password);
    expectSessionCookieAttributes(response, 1800);
    const claims = decode(sessionFrom(response).accessToken.split('.')[1]!);
    expect(Number(claims.exp) - Number(claims.iat)).toBe(1800);
    t.clock.advance(1800 * 1000);
    expectError(await me(t.app, sessionFrom(response).cookie), 401, 'Not authenticated');
  });
});

describe('the redirect path and other root routes', () => {
  const t = useTestApp(sqlite, {}, { accounts: true });

  it('take no form bodies and need no session or CSRF token', async () => {
    const form = await t.app.inject({
      method: 'POST',
      url: '/shorten',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'code=abcdef12&url=https%3A%2F%2Fexample.com',
    });
    expectError(form, 415);
    const { session } = await signUp(t.app, 'rt');
    // A session cookie without X-CSRF-Token is irrelevant outside /api/ (spec §5.4 step 3).
    const created = await postShorten(
      t.app,
      { code: 'sessn001', url: 'https://example.com', created_at: '2024-01-01T00:00:00Z', click_count: 0 },
      { cookie: session.cookie },
    );
    expect(created.statusCode, created.body).toBe(201);
    const resolved = await t.app.inject({ method: 'GET', url: '/sessn001', headers: { cookie: session.cookie } });
    expect(resolved.statusCode).toBe(302);
    expect(resolved.headers['set-cookie']).toBeUndefined();
  });
});
