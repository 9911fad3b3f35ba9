import { describe, expect, it } from 'vitest';
import { adminEnv, useTestApp } from '../helpers/app.js';
import { BACKENDS } from '../helpers/backends.js';
import { expectError } from '../helpers/http.js';
import { jsonPost, login, newUser, registerUser } from '../helpers/auth.js';

const REGISTER = '/api/v1/auth/register';

/** Spec §5.6 and the design's "Accounts": registration rules, details and check order. */
describe.each(BACKENDS)('POST /api/v1/auth/register on $name', (backend) => {
  const admin = { username: 'root_admin', email: 'root@example.com', password: 'admin password 1' };
  const t = useTestApp(backend, adminEnv(admin), { accounts: true });

  it.skipIf(!backend.available)(
    'creates a user: 201 {id, username, email, role, created_at}, email lower-cased',
    async () => {
      const body = newUser('reg', { email: 'Mixed.Case@Example.COM' });
      const response = await jsonPost(t.app, REGISTER, body);
      expect(response.statusCode, response.body).toBe(201);
      const created = response.json();
      expect(created).toEqual({
        id: expect.any(Number),
        username: body.username,
        email: 'mixed.case@example.com',
        role: 'user',
        created_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/),
      });
      expect(response.body).not.toMatch(/password/);
    },
  );

  it.skipIf(!backend.available)('400 `Password must be at least 8 characters` below the default minimum', async () => {
    const response = await jsonPost(t.app, REGISTER, newUser('reg', { password: 'seven77' }));
    expectError(response, 400, 'Password must be at least 8 characters');
    expectError(
      await jsonPost(t.app, REGISTER, newUser('reg', { password: '' })),
      400,
      'Password must be at least 8 characters',
    );
  });

  it.skipIf(!backend.available)('counts characters, not bytes, for the minimum', async () => {
    // 8 characters, 16 bytes.
    const response = await jsonPost(t.app, REGISTER, newUser('reg', { password: 'ééééééé' }));
    expectError(response, 400, 'Password must be at least 8 characters');
    await registerUser(t.app, newUser('reg', { password: 'éééééééé' }));
  });

  it.skipIf(!backend.available)(
    "400 `Password must be at most 72 bytes` beyond bcrypt's limit, never truncated",
    async () => {
      await registerUser(t.app, newUser('reg', { password: 'a'.repeat(72) }));
      expectError(
        await jsonPost(t.app, REGISTER, newUser('reg', { password: 'a'.repeat(73) })),
        400,
        'Password must be at most 72 bytes',
      );
      // 37 two-byte characters: 74 bytes.
      expectError(
        await jsonPost(t.app, REGISTER, newUser('reg', { password: 'é'.repeat(37) })),
        400,
        'Password must be at most 72 bytes',
      );
    },
  );

  it.skipIf(!backend.available)('a 72-byte password works, and its 73-byte extension does not log in', async () => {
    const body = newUser('reg', { password: 'b'.repeat(72) });
    await registerUser(t.app, body);
    await login(t.app, body.username, body.password);
    const longer = await jsonPost(t.app, '/api/v1/auth/login', {
      username: body.username,
      password: `${body.password}X`,
    });
    expectError(longer, 401, 'Invalid username or password');
  });

  it.skipIf(!backend.available)('409 `Username already registered`, also in another letter case', async () => {
    const first = newUser('dup');
    await registerUser(t.app, first);
    expectError(
      await jsonPost(t.app, REGISTER, newUser('x', { username: first.username })),
      409,
      'Username already registered',
    );
    expectError(
      await jsonPost(t.app, REGISTER, newUser('x', { username: first.username.toUpperCase() })),
      409,
      'Username already registered',
    );
  });

  it.skipIf(!backend.available)('409 `User already exists` for a used email, in any case', async () => {
    const first = newUser('mail');
    await registerUser(t.app, first);
    expectError(await jsonPost(t.app, REGISTER, newUser('y', { email: first.email })), 409, 'User already exists');
    expectError(
      await jsonPost(t.app, REGISTER, newUser('y', { email: first.email.toUpperCase() })),
      409,
      'User already exists',
    );
  });

  it.skipIf(!backend.available)(
    'checks in order: body shape (422) → password (400) → username (409) → email (409)',
    async () => {
      const taken = newUser('order');
      await registerUser(t.app, taken);
      // Shape beats everything: bad email with short password and taken username.
      expectError(
        await jsonPost(t.app, REGISTER, { username: taken.username, email: 'not-an-email', password: 'short' }),
        422,
        /email/,
      );
      // Password beats the taken username and email.
      expectError(
        await jsonPost(t.app, REGISTER, { username: taken.username, email: taken.email, password: 'short' }),
        400,
        'Password must be at least 8 characters',
      );
      // Username beats email.
      expectError(
        await jsonPost(t.app, REGISTER, { username: taken.username, email: taken.email, password: 'long enough pw' }),
        409,
        'Username already registered',
      );
      expectError(
        await jsonPost(t.app, REGISTER, {
          username: `${taken.username}b`,
          email: taken.email,
          password: 'long enough pw',
        }),
        409,
        'User already exists',
      );
    },
  );

  it.skipIf(!backend.available)('422 for body-shape failures', async () => {
    const ok = newUser('shape');
    const cases: Array<[unknown, RegExp]> = [
      [{ email: ok.email, password: ok.password }, /username/],
      [{ username: ok.username, password: ok.password }, /email/],
      [{ username: ok.username, email: ok.email }, /password/],
      [{ ...ok, username: 'ab' }, /username/],
      [{ ...ok, username: 'a'.repeat(33) }, /username/],
      [{ ...ok, username: 'has space' }, /username/],
      [{ ...ok, username: 'émile' }, /username/],
      [{ ...ok, email: 'two@@example.com' }, /email/],
      [{ ...ok, email: 'no-domain@' }, /email/],
      [{ ...ok, email: 'nodot@example' }, /email/],
      [{ ...ok, password: 12345678 }, /password/],
      [{ ...ok, role: 'admin' }, /role/],
      [[ok], /body/],
    ];
    for (const [body, field] of cases) expectError(await jsonPost(t.app, REGISTER, body), 422, field);
    expectError(await jsonPost(t.app, REGISTER, '{"username":', {}), 422);
  });

  it.skipIf(!backend.available)('never makes an admin through registration', async () => {
    const created = await registerUser(t.app, newUser('role'));
    expect(created.role).toBe('user');
  });

  it.skipIf(!backend.available)('ADMIN_* created the first administrator at start-up', async () => {
    const session = await login(t.app, admin.username, admin.password);
    const me = await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: { cookie: session.cookie } });
    expect(me.json()).toMatchObject({ username: admin.username, email: admin.email, role: 'admin' });
  });

  it.skipIf(!backend.available)('follows a runtime change of password_min_length', async () => {
    const adminSession = await login(t.app, admin.username, admin.password);
    const patch = await t.app.inject({
      method: 'PATCH',
      url: '/api/v1/admin/settings',
      headers: { ...adminSession.headers, 'content-type': 'application/json' },
      payload: JSON.stringify({ password_min_length: 12 }),
    });
    expect(patch.statusCode, patch.body).toBe(200);
    try {
      expectError(
        await jsonPost(t.app, REGISTER, newUser('min', { password: 'elevenchars' })),
        400,
        'Password must be at least 12 characters',
      );
      await registerUser(t.app, newUser('min', { password: 'twelve chars' }));
    } finally {
      const reset = await t.app.inject({
        method: 'PATCH',
        url: '/api/v1/admin/settings',
        headers: { ...adminSession.headers, 'content-type': 'application/json' },
        payload: JSON.stringify({ password_min_length: 8 }),
      });
      expect(reset.statusCode, reset.body).toBe(200);
    }
  });

  it.skipIf(!backend.available)('answers 415 to a form body: only login takes forms', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: REGISTER,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'username=formuser&email=f%40example.com&password=longenough',
    });
    expectError(response, 415);
  });
});
