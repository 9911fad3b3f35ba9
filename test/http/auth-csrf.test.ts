import cookie from '@fastify/cookie';
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSecurityMetrics } from '../../src/adapters/auth/security-metrics.js';
import { registerErrorHandling } from '../../src/http/error-handler.js';
import csrfPlugin from '../../src/http/plugins/csrf.js';
import { useTestApp } from '../helpers/app.js';
import { BACKENDS, sqlite } from '../helpers/backends.js';
import { expectError, postShorten } from '../helpers/http.js';
import { jsonPost, login, metricValue, newUser, signUp } from '../helpers/auth.js';

const MISSING = 'CSRF token missing from X-CSRF-Token header';
const MISMATCH = 'CSRF token invalid or does not match cookie';
const SIGNATURE = 'CSRF token signature invalid';
const SETTINGS = '/api/v1/admin/settings';

/** Spec §5.4, row by row, through the real app (PATCH /api/v1/admin/settings is a protected route). */
describe.each(BACKENDS)('CSRF validation on $name', (backend) => {
  const adminUser = { username: 'csrf_admin', email: 'csrf_admin@example.com', password: 'admin password 1' };
  const t = useTestApp(backend, {}, { accounts: true, admin: adminUser });
  const admin = t.admin;

  const patch = (headers: Record<string, string>, body: unknown = {}) =>
    t.app.inject({
      method: 'PATCH',
      url: SETTINGS,
      headers: { 'content-type': 'application/json', ...headers },
      payload: JSON.stringify(body),
    });
  const failures = (reason: string) => metricValue(t.app, 'csrf_failures_total', { reason });
  const allFailures = async () =>
    (await failures('missing_header')) + (await failures('token_mismatch')) + (await failures('invalid_signature'));

  /** The request fails with `detail` and increments exactly `reason`'s counter. */
  async function expectCsrfFailure(send: () => Promise<LightMyRequestResponse>, reason: string, detail: string) {
    const reasons = ['missing_header', 'token_mismatch', 'invalid_signature'];
    const before = await Promise.all(reasons.map(failures));
    expectError(await send(), 403, detail);
    const after = await Promise.all(reasons.map(failures));
    expect(after).toEqual(before.map((n, i) => (reasons[i] === reason ? n + 1 : n)));
  }

  it.skipIf(!backend.available)('exposes csrf_failures_total{reason} for every reason on GET /metrics', async () => {
    const text = (await t.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(text).toMatch(/^# TYPE csrf_failures_total counter$/m);
    for (const reason of ['missing_header', 'token_mismatch', 'invalid_signature']) {
      expect(text).toMatch(new RegExp(`^csrf_failures_total\\{reason="${reason}"\\} \\d+$`, 'm'));
    }
  });

  it.skipIf(!backend.available)('step 1: GET, HEAD and OPTIONS are not validated', async () => {
    const before = await allFailures();
    const get = await t.app.inject({ method: 'GET', url: SETTINGS, headers: { cookie: admin.cookie } });
    expect(get.statusCode, get.body).toBe(200);
    const head = await t.app.inject({ method: 'HEAD', url: '/api/v1/auth/me', headers: { cookie: admin.cookie } });
    expect(head.statusCode).toBe(200);
    const options = await t.app.inject({ method: 'OPTIONS', url: SETTINGS, headers: { cookie: admin.cookie } });
    expect(options.statusCode).toBe(204);
    expect(await allFailures()).toBe(before);
  });

  it.skipIf(!backend.available)('step 2: login and register are not validated (nor logout, spec §4.3)', async () => {
    const before = await allFailures();
    const body = newUser('cs');
    // A stale session cookie and no header: still no CSRF failure.
    const stale = { cookie: admin.cookie };
    expect((await jsonPost(t.app, '/api/v1/auth/register', body, stale)).statusCode).toBe(201);
    expect(
      (await jsonPost(t.app, '/api/v1/auth/login', { username: body.username, password: body.password }, stale))
        .statusCode,
    ).toBe(200);
    const { session } = await signUp(t.app, 'cso');
    const logout = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/logout',
      headers: { cookie: session.cookie },
    });
    expect(logout.statusCode).toBe(200);
    expect(await allFailures()).toBe(before);
  });

  it.skipIf(!backend.available)('step 3: paths outside /api/ are not validated', async () => {
    const before = await allFailures();
    const created = await postShorten(
      t.app,
      { code: 'csrfok01', url: 'https://example.com', created_at: '2024-01-01T00:00:00Z', click_count: 0 },
      { cookie: admin.cookie },
    );
    expect(created.statusCode, created.body).toBe(201);
    const deleted = await t.app.inject({ method: 'DELETE', url: '/csrfok01', headers: { cookie: admin.cookie } });
    expect(deleted.statusCode).toBe(204);
    expect(await allFailures()).toBe(before);
  });

  it.skipIf(!backend.available)(
    'step 4: without an access_token cookie validation is skipped; authentication answers 401',
    async () => {
      const before = await allFailures();
      expectError(await patch({}), 401, 'Not authenticated');
      expectError(await patch({ cookie: `csrf_token=${admin.csrfToken}` }), 401, 'Not authenticated');
      expectError(await patch({ cookie: 'access_token=' }), 401, 'Not authenticated');
      expect(await allFailures()).toBe(before);
    },
  );

  it.skipIf(!backend.available)('step 5: no X-CSRF-Token header → 403 missing_header', async () => {
    await expectCsrfFailure(() => patch({ cookie: admin.cookie }), 'missing_header', MISSING);
    // Checked before authorisation: a non-admin sees the CSRF failure too.
    const { session } = await signUp(t.app, 'csu');
    await expectCsrfFailure(() => patch({ cookie: session.cookie }), 'missing_header', MISSING);
  });

  it.skipIf(!backend.available)('step 6: header ≠ cookie, or either empty → 403 token_mismatch', async () => {
    const other = await login(t.app, adminUser.username, adminUser.password);
    await expectCsrfFailure(
      () => patch({ cookie: admin.cookie, 'x-csrf-token': other.csrfToken }),
      'token_mismatch',
      MISMATCH,
    );
    await expectCsrfFailure(
      () => patch({ cookie: admin.cookie, 'x-csrf-token': `${admin.csrfToken}x` }),
      'token_mismatch',
      MISMATCH,
    );
    await expectCsrfFailure(() => patch({ cookie: admin.cookie, 'x-csrf-token': '' }), 'token_mismatch', MISMATCH);
    await expectCsrfFailure(
      () => patch({ cookie: `access_token=${admin.accessToken}`, 'x-csrf-token': admin.csrfToken }),
      'token_mismatch',
      MISMATCH,
    );
    await expectCsrfFailure(
      () => patch({ cookie: `access_token=${admin.accessToken}; csrf_token=`, 'x-csrf-token': '' }),
      'token_mismatch',
      MISMATCH,
    );
  });

  it.skipIf(!backend.available)('step 7: a token not signed for this session → 403 invalid_signature', async () => {
    // Another session's genuine token, sent consistently in header and cookie.
    const other = await login(t.app, adminUser.username, adminUser.password);
    const crossed = {
      cookie: `access_token=${admin.accessToken}; csrf_token=${other.csrfToken}`,
      'x-csrf-token': other.csrfToken,
    };
    await expectCsrfFailure(() => patch(crossed), 'invalid_signature', SIGNATURE);
    // A made-up token.
    const madeUp = 'bm9uY2Vub25jZW5vbmNl.c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJlc2lnbmE';
    await expectCsrfFailure(
      () => patch({ cookie: `access_token=${admin.accessToken}; csrf_token=${madeUp}`, 'x-csrf-token': madeUp }),
      'invalid_signature',
      SIGNATURE,
    );
    // An access token that is not a JWT cannot be bound to anything.
    await expectCsrfFailure(
      () => patch({ cookie: `access_token=junk; csrf_token=${admin.csrfToken}`, 'x-csrf-token': admin.csrfToken }),
      'invalid_signature',
      SIGNATURE,
    );
  });

  it.skipIf(!backend.available)('step 8: all checks pass → the request proceeds', async () => {
    const before = await allFailures();
    const response = await patch(admin.headers, { max_login_attempts: 5 });
    expect(response.statusCode, response.body).toBe(200);
    expect(await allFailures()).toBe(before);
  });

  it.skipIf(!backend.available)('after the CSRF checks, a non-admin is refused with 403', async () => {
    const { session } = await signUp(t.app, 'csn');
    expectError(await patch(session.headers, { max_login_attempts: 5 }), 403, 'Admin privileges required');
  });
});

/**
 * The plugin on its own, with a real session from the service: every method, and step 3 checked by
 * the plugin itself (the app only ever runs it under /api/).
 */
describe('CSRF plugin', () => {
  const t = useTestApp(sqlite, {}, { accounts: true });
  const session = t.user('plug');
  let probe: FastifyInstance;
  const registry = new Registry();

  beforeAll(async () => {
    probe = Fastify();
    registerErrorHandling(probe, 1024);
    await probe.register(cookie);
    await probe.register(csrfPlugin, { auth: t.service.auth, metrics: createSecurityMetrics(registry) });
    for (const method of ['GET', 'OPTIONS', 'POST', 'PUT', 'PATCH', 'DELETE'] as const) {
      // GET routes answer HEAD too.
      probe.route({ method, url: '/api/thing', handler: async (_req, reply) => reply.code(200).send({ ok: true }) });
      probe.route({ method, url: '/elsewhere', handler: async (_req, reply) => reply.code(200).send({ ok: true }) });
    }
    probe.post('/api/v1/auth/login', async () => ({ ok: true }));
    probe.post('/api/v1/auth/register', async () => ({ ok: true }));
  });
  afterAll(async () => {
    await probe?.close();
  });

  const send = (method: string, url: string, headers: Record<string, string>) =>
    probe.inject({ method: method as 'POST', url, headers });
  const counted = async (reason: string) =>
    (await registry.getSingleMetric('csrf_failures_total')!.get()).values.find((v) => v.labels.reason === reason)
      ?.value ?? 0;

  it('validates POST, PUT, PATCH and DELETE under /api/', async () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      expectError(await send(method, '/api/thing', { cookie: session.cookie }), 403, MISSING);
      expect((await send(method, '/api/thing', session.headers)).statusCode).toBe(200);
    }
    expect(await counted('missing_header')).toBe(4);
  });

  it('skips GET, HEAD and OPTIONS (step 1)', async () => {
    for (const method of ['GET', 'HEAD', 'OPTIONS']) {
      expect((await send(method, '/api/thing', { cookie: session.cookie })).statusCode).toBe(200);
    }
  });

  it('skips login and register (step 2), including with a query string', async () => {
    expect((await send('POST', '/api/v1/auth/login', { cookie: session.cookie })).statusCode).toBe(200);
    expect((await send('POST', '/api/v1/auth/register?x=1', { cookie: session.cookie })).statusCode).toBe(200);
  });

  it('skips paths that do not start with /api/ (step 3)', async () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      expect((await send(method, '/elsewhere', { cookie: session.cookie })).statusCode).toBe(200);
    }
  });

  it('skips requests without an access_token cookie (step 4)', async () => {
    expect((await send('POST', '/api/thing', {})).statusCode).toBe(200);
    expect((await send('POST', '/api/thing', { cookie: `csrf_token=${session.csrfToken}` })).statusCode).toBe(200);
  });

  it('counts each failure by reason', async () => {
    const before = [await counted('token_mismatch'), await counted('invalid_signature')];
    expectError(await send('POST', '/api/thing', { cookie: session.cookie, 'x-csrf-token': 'nope' }), 403, MISMATCH);
    const other = (await signUp(t.app, 'plug2')).session;
    expectError(
      await send('POST', '/api/thing', {
        cookie: `access_token=${session.accessToken}; csrf_token=${other.csrfToken}`,
        'x-csrf-token': other.csrfToken,
      }),
      403,
      SIGNATURE,
    );
    expect([await counted('token_mismatch'), await counted('invalid_signature')]).toEqual([
      before[0]! + 1,
      before[1]! + 1,
    ]);
  });
});
