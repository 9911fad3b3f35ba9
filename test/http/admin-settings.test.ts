import { describe, expect, it } from 'vitest';
import { adminEnv, startTestApp, useTestApp } from '../helpers/app.js';
import { BACKENDS, sqlite } from '../helpers/backends.js';
import { expectError } from '../helpers/http.js';
import { login, signUp } from '../helpers/auth.js';

const SETTINGS = '/api/v1/admin/settings';
const ADMIN = { username: 'settings_admin', email: 'settings_admin@example.com', password: 'admin password 1' };
const ADMIN_ENV = adminEnv(ADMIN);
/** The rate-limit values (design: admin settings include them), at their RATE_LIMIT_* defaults. */
const RATE_LIMIT_DEFAULTS = {
  rate_limit_auth_limit: 20,
  rate_limit_auth_window_seconds: 60,
  rate_limit_writes_limit: 60,
  rate_limit_writes_window_seconds: 60,
  rate_limit_redirects_limit: 50_000,
  rate_limit_redirects_window_seconds: 1,
  rate_limit_default_limit: 600,
  rate_limit_default_window_seconds: 60,
};
const DEFAULTS = {
  password_min_length: 8,
  max_login_attempts: 5,
  lockout_duration_minutes: 15,
  ...RATE_LIMIT_DEFAULTS,
  link_write_policy: 'open',
};

describe.each(BACKENDS)('GET/PATCH /api/v1/admin/settings on $name', (backend) => {
  const t = useTestApp(backend, {}, { accounts: true, admin: ADMIN });
  const admin = t.admin;

  const get = (cookie?: string) => t.app.inject({ method: 'GET', url: SETTINGS, headers: cookie ? { cookie } : {} });
  const patch = (headers: Record<string, string>, body: unknown) =>
    t.app.inject({
      method: 'PATCH',
      url: SETTINGS,
      headers: { 'content-type': 'application/json', ...headers },
      payload: JSON.stringify(body),
    });

  it.skipIf(!backend.available)('GET: 200 with every setting, the defaults at first', async () => {
    const response = await get(admin.cookie);
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toEqual(DEFAULTS);
  });

  it.skipIf(!backend.available)('401 without a session, 403 for a non-admin', async () => {
    expectError(await get(), 401, 'Not authenticated');
    expectError(await patch({}, { max_login_attempts: 3 }), 401, 'Not authenticated');
    const { session } = await signUp(t.app, 'nonadmin');
    expectError(await get(session.cookie), 403, 'Admin privileges required');
    expectError(await patch(session.headers, { max_login_attempts: 3 }), 403, 'Admin privileges required');
    expect((await get(admin.cookie)).json()).toEqual(DEFAULTS);
  });

  it.skipIf(!backend.available)(
    'PATCH changes only the given settings, answers every value, and GET agrees',
    async () => {
      const response = await patch(admin.headers, { max_login_attempts: 7 });
      expect(response.statusCode, response.body).toBe(200);
      expect(response.json()).toEqual({ ...DEFAULTS, max_login_attempts: 7 });
      expect((await get(admin.cookie)).json()).toEqual({ ...DEFAULTS, max_login_attempts: 7 });
      const empty = await patch(admin.headers, {});
      expect(empty.json()).toEqual({ ...DEFAULTS, max_login_attempts: 7 });
      expect((await patch(admin.headers, DEFAULTS)).json()).toEqual(DEFAULTS);
    },
  );

  it.skipIf(!backend.available)(
    'PATCH validates: 422 for out-of-range, non-integer, null and unknown values',
    async () => {
      const cases: Array<[unknown, RegExp]> = [
        [{ password_min_length: 7 }, /password_min_length/],
        [{ password_min_length: 73 }, /password_min_length/],
        [{ max_login_attempts: 0 }, /max_login_attempts/],
        [{ max_login_attempts: 101 }, /max_login_attempts/],
        [{ lockout_duration_minutes: 0 }, /lockout_duration_minutes/],
        [{ lockout_duration_minutes: 1441 }, /lockout_duration_minutes/],
        [{ lockout_duration_minutes: 1.5 }, /lockout_duration_minutes/],
        [{ max_login_attempts: '5' }, /max_login_attempts/],
        [{ max_login_attempts: null }, /max_login_attempts/],
        [{ session_minutes: 5 }, /session_minutes/],
        [{ rate_limit_writes_limit: 0 }, /rate_limit_writes_limit/],
        [{ rate_limit_writes_limit: 1_000_000_001 }, /rate_limit_writes_limit/],
        [{ rate_limit_redirects_window_seconds: 0 }, /rate_limit_redirects_window_seconds/],
        [{ rate_limit_redirects_window_seconds: 86_401 }, /rate_limit_redirects_window_seconds/],
        [{ rate_limit_auth_limit: 2.5 }, /rate_limit_auth_limit/],
        [{ rate_limit_uploads_limit: 5 }, /rate_limit_uploads_limit/],
        [{ link_write_policy: 'closed' }, /link_write_policy/],
        [{ link_write_policy: 1 }, /link_write_policy/],
        [{ link_write_policy: null }, /link_write_policy/],
        [[1], /body/],
      ];
      for (const [body, field] of cases) expectError(await patch(admin.headers, body), 422, field);
      expect((await get(admin.cookie)).json()).toEqual(DEFAULTS);
    },
  );

  it.skipIf(!backend.available)(
    'persists changes: another instance on the same database starts with them',
    async () => {
      expect((await patch(admin.headers, { lockout_duration_minutes: 30 })).statusCode).toBe(200);
      const second = await startTestApp(backend, ADMIN_ENV, { accounts: true, database: t.database });
      try {
        const secondAdmin = await login(second.app, ADMIN_ENV.ADMIN_USERNAME, ADMIN_ENV.ADMIN_PASSWORD);
        const response = await second.app.inject({
          method: 'GET',
          url: SETTINGS,
          headers: { cookie: secondAdmin.cookie },
        });
        expect(response.json()).toEqual({ ...DEFAULTS, lockout_duration_minutes: 30 });
      } finally {
        await second.close();
        await patch(admin.headers, DEFAULTS);
      }
    },
  );
});

describe('runtime setting defaults from the environment', () => {
  const t = useTestApp(
    sqlite,
    {
      ...ADMIN_ENV,
      PASSWORD_MIN_LENGTH: '10',
      MAX_LOGIN_ATTEMPTS: '3',
      LOCKOUT_DURATION_MINUTES: '60',
      RATE_LIMIT_WRITES_LIMIT: '120',
      RATE_LIMIT_WRITES_WINDOW_S: '30',
      LINK_WRITE_POLICY: 'owned',
    },
    { accounts: true },
  );

  it('apply until an administrator changes them', async () => {
    const admin = await login(t.app, ADMIN_ENV.ADMIN_USERNAME, ADMIN_ENV.ADMIN_PASSWORD);
    const response = await t.app.inject({ method: 'GET', url: SETTINGS, headers: { cookie: admin.cookie } });
    const fromEnv = {
      ...RATE_LIMIT_DEFAULTS,
      rate_limit_writes_limit: 120,
      rate_limit_writes_window_seconds: 30,
      link_write_policy: 'owned',
    };
    expect(response.json()).toEqual({
      password_min_length: 10,
      max_login_attempts: 3,
      lockout_duration_minutes: 60,
      ...fromEnv,
    });
    const patched = await t.app.inject({
      method: 'PATCH',
      url: SETTINGS,
      headers: { ...admin.headers, 'content-type': 'application/json' },
      payload: JSON.stringify({ password_min_length: 9 }),
    });
    expect(patched.json()).toEqual({
      password_min_length: 9,
      max_login_attempts: 3,
      lockout_duration_minutes: 60,
      ...fromEnv,
    });
  });
});
