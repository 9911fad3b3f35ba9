/**
 * Response headers of issue 16: `/docs/` cannot be framed and has a CSP; answers with a body carry
 * `X-Content-Type-Options: nosniff`; session answers (login, register, `/me`, the rest of `/api/`)
 * are never cached. The redirect path keeps only its own headers (no hook added to it).
 */
import { describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { sqlite } from '../helpers/backends.js';
import { codeMaker, createMapping, HTTP_TEST_ENV, newMapping } from '../helpers/http.js';
import { jsonPost, newUser } from '../helpers/auth.js';

describe('security headers', () => {
  const t = useTestApp(sqlite, HTTP_TEST_ENV, { accounts: true });
  const nextCode = codeMaker('shdr');
  const user = newUser('shdr');

  it.each(['/docs/', '/docs/static/index.css', '/docs/static/swagger-initializer.js'])(
    '%s: CSP with frame-ancestors none, nosniff (the page: X-Frame-Options DENY)',
    async (url) => {
      const response = await t.app.inject({ method: 'GET', url });
      expect(response.statusCode).toBe(200);
      const csp = String(response.headers['content-security-policy']);
      expect(csp).toContain("frame-ancestors 'none'");
      expect(csp).toContain("default-src 'self'");
      expect(csp).toContain("object-src 'none'");
      expect(csp).not.toContain('upgrade-insecure-requests'); // would break a plain-HTTP deployment
      // The page is what a frame would show; its assets need only the CSP.
      if (url === '/docs/') expect(response.headers['x-frame-options']).toBe('DENY');
      expect(response.headers['x-content-type-options']).toBe('nosniff');
    },
  );

  it('API answers carry nosniff: success, error, unknown path, health, metrics, OpenAPI', async () => {
    const mapping = await createMapping(t.app, newMapping(nextCode));
    const answers = await Promise.all([
      t.app.inject({ method: 'GET', url: '/urls' }),
      t.app.inject({ method: 'PATCH', url: `/${mapping.code}`, payload: { url: 'https://example.com/b' } }),
      t.app.inject({ method: 'GET', url: '/nosuchcode' }),
      t.app.inject({ method: 'GET', url: '/no/such/path' }),
      t.app.inject({ method: 'GET', url: '/health' }),
      t.app.inject({ method: 'GET', url: '/metrics' }),
      t.app.inject({ method: 'GET', url: '/openapi.json' }),
      t.app.inject({ method: 'GET', url: '/api/v1/auth/me' }),
    ]);
    for (const response of answers) {
      expect(response.headers['x-content-type-options'], response.raw.req.url).toBe('nosniff');
    }
    expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 404, 404, 200, 200, 200, 401]);
  });

  it('register, login (success and failure), /me and logout: Cache-Control no-store', async () => {
    const register = await jsonPost(t.app, '/api/v1/auth/register', user);
    expect(register.statusCode).toBe(201);
    const failed = await jsonPost(t.app, '/api/v1/auth/login', { username: user.username, password: 'wrong one' });
    expect(failed.statusCode).toBe(401);
    const login = await jsonPost(t.app, '/api/v1/auth/login', { username: user.username, password: user.password });
    expect(login.statusCode).toBe(200);
    const cookie = login.cookies.map((c) => `${c.name}=${c.value}`).join('; ');
    const me = await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: { cookie } });
    expect(me.statusCode).toBe(200);
    const anonymous = await t.app.inject({ method: 'GET', url: '/api/v1/auth/me' });
    const logout = await jsonPost(t.app, '/api/v1/auth/logout', {});
    for (const response of [register, failed, login, me, anonymous, logout]) {
      expect(response.headers['cache-control'], response.raw.req.url).toBe('no-store');
      expect(response.headers['x-content-type-options']).toBe('nosniff');
    }
  });

  it('the redirect keeps its configured Cache-Control and gets no security hook', async () => {
    const mapping = await createMapping(t.app, newMapping(nextCode));
    const response = await t.app.inject({ method: 'GET', url: `/${mapping.code}` });
    expect(response.statusCode).toBe(302);
    expect(response.headers['cache-control']).toBe('private, max-age=0');
    expect(response.headers['x-content-type-options']).toBeUndefined();
  });
});
