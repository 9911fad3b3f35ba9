import { beforeEach, describe, expect, it, vi } from 'vitest';
import { AUTH_CACHE_MS, type AuthState, createAuthStore, NetworkError, safeNext } from '../src/lib/auth-store';

const SESSION = { id: 7, username: 'alice', email: 'alice@example.com', role: 'user', csrf_token: 'nonce.sig' };

const json = (status: number, body: unknown) =>
  status === 204
    ? new Response(null, { status })
    : new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });

/** A fake server: answers each request with the next queued answer, records what was sent. */
function harness(address = '/app/links?after=20') {
  const answers: Array<() => Response> = [];
  const sent: Array<{ method: string; path: string; headers: Record<string, string>; body?: unknown }> = [];
  let clock = 1_000_000;
  const navigations: string[] = [];
  const fetch = vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
    sent.push({
      method: init?.method ?? 'GET',
      path: String(input),
      headers: { ...(init?.headers as Record<string, string>) },
      body: init?.body,
    });
    const answer = answers.shift();
    if (!answer) throw new Error(`unexpected request ${String(input)}`);
    return answer();
  });
  let here = address;
  const store = createAuthStore({
    fetch: fetch as typeof globalThis.fetch,
    now: () => clock,
    currentAddress: () => here,
    navigate: (to) => {
      navigations.push(to);
      here = to;
    },
  });
  return {
    store,
    fetch,
    sent,
    navigations,
    answer: (status: number, body: unknown = {}) => answers.push(() => json(status, body)),
    networkDown: () =>
      answers.push(() => {
        throw new TypeError('Failed to fetch');
      }),
    tick: (ms: number) => (clock += ms),
    goTo: (to: string) => (here = to),
  };
}

const FIELDS = ['isAuthenticated', 'username', 'userId', 'userRole', 'userEmail', 'csrfToken', 'timestamp'];

describe('auth store (spec §2.4 and §5.7)', () => {
  let h: ReturnType<typeof harness>;
  beforeEach(() => {
    h = harness();
  });

  it('holds exactly the fields of spec §2.4, unknown at first', () => {
    const state = h.store.current();
    expect(Object.keys(state).sort()).toEqual([...FIELDS].sort());
    expect(state.isAuthenticated).toBeNull();
    expect(state.csrfToken).toBeNull();
  });

  it('a successful verification fills the state from GET /api/v1/auth/me', async () => {
    h.answer(200, SESSION);
    const state = await h.store.verify();
    expect(h.sent[0]).toMatchObject({ method: 'GET', path: '/api/v1/auth/me' });
    expect(state).toEqual<AuthState>({
      isAuthenticated: true,
      username: 'alice',
      userId: '7',
      userRole: 'user',
      userEmail: 'alice@example.com',
      csrfToken: 'nonce.sig',
      timestamp: 1_000_000,
    });
  });

  describe('the 30-second cache', () => {
    it('answers from the cache for 30 s after a successful verification, then asks again', async () => {
      h.answer(200, SESSION);
      await h.store.verify();
      h.tick(AUTH_CACHE_MS - 1);
      await h.store.verify();
      expect(h.fetch).toHaveBeenCalledTimes(1);

      h.tick(1);
      h.answer(200, { ...SESSION, csrf_token: 'new.token' });
      const state = await h.store.verify();
      expect(h.fetch).toHaveBeenCalledTimes(2);
      expect(state.csrfToken).toBe('new.token');
      expect(state.timestamp).toBe(1_000_000 + AUTH_CACHE_MS);
    });

    it('caches only a success: a signed-out state is checked with the server every time', async () => {
      h.goTo('/app/login');
      h.answer(401, { detail: 'Not authenticated' });
      await h.store.verify();
      h.answer(200, SESSION);
      expect((await h.store.verify()).isAuthenticated).toBe(true);
      expect(h.fetch).toHaveBeenCalledTimes(2);
    });

    it('concurrent verifications share one request', async () => {
      h.answer(200, SESSION);
      await Promise.all([h.store.verify(), h.store.verify(), h.store.verify({ force: true })]);
      expect(h.fetch).toHaveBeenCalledTimes(1);
    });
  });

  describe('a forced refresh', () => {
    it('bypasses a fresh cache and takes what the server says', async () => {
      h.answer(200, SESSION);
      await h.store.verify();
      h.tick(1_000);
      h.answer(200, { ...SESSION, role: 'admin' });
      const state = await h.store.verify({ force: true });
      expect(h.fetch).toHaveBeenCalledTimes(2);
      expect(state.userRole).toBe('admin');
      expect(state.timestamp).toBe(1_001_000);
    });

    it('finds a session revoked on the server inside the 30 s', async () => {
      h.answer(200, SESSION);
      await h.store.verify();
      h.answer(401, { detail: 'Not authenticated' });
      const state = await h.store.verify({ force: true });
      expect(state.isAuthenticated).toBe(false);
      expect(h.navigations).toEqual(['/app/login?next=%2Fapp%2Flinks%3Fafter%3D20']);
    });
  });

  describe('a network failure', () => {
    it('keeps the cached state, even when the cache has run out', async () => {
      h.answer(200, SESSION);
      const before = await h.store.verify();
      h.tick(AUTH_CACHE_MS + 5_000);
      h.networkDown();
      const after = await h.store.verify();
      expect(after).toEqual(before);
      expect(h.fetch).toHaveBeenCalledTimes(2);
      expect(h.navigations).toEqual([]);
    });

    it('keeps the cached state on a forced refresh too', async () => {
      h.answer(200, SESSION);
      const before = await h.store.verify();
      h.networkDown();
      expect(await h.store.verify({ force: true })).toEqual(before);
    });

    it('keeps an unknown state unknown (no redirect to login)', async () => {
      h.networkDown();
      expect((await h.store.verify()).isAuthenticated).toBeNull();
      expect(h.navigations).toEqual([]);
    });

    it('a server error (5xx) is not a verdict on the session either', async () => {
      h.answer(200, SESSION);
      const before = await h.store.verify();
      h.tick(AUTH_CACHE_MS);
      h.answer(503, { detail: 'Service unavailable' });
      expect(await h.store.verify()).toEqual(before);
    });

    it('an API request without an answer throws NetworkError and leaves the state alone', async () => {
      h.answer(200, SESSION);
      const before = await h.store.verify();
      h.networkDown();
      await expect(h.store.request('GET', '/urls')).rejects.toBeInstanceOf(NetworkError);
      expect(h.store.current()).toEqual(before);
    });
  });

  describe('any 401', () => {
    it('clears the state and goes to the login page remembering the address', async () => {
      h.answer(200, SESSION);
      await h.store.verify();
      h.tick(500);
      h.answer(401, { detail: 'Not authenticated' });
      const response = await h.store.request('GET', '/api/v1/executions');
      expect(response.status).toBe(401);
      expect(h.store.current()).toEqual({
        isAuthenticated: false,
        username: null,
        userId: null,
        userRole: null,
        userEmail: null,
        csrfToken: null,
        timestamp: 1_000_500,
      });
      expect(h.navigations).toEqual(['/app/login?next=%2Fapp%2Flinks%3Fafter%3D20']);
    });

    it('from a non-GET request too, and the cleared state is not served from the cache', async () => {
      h.answer(200, SESSION);
      await h.store.verify();
      h.answer(401, { detail: 'Not authenticated' });
      await expect(h.store.requestJson('PATCH', '/api/v1/admin/settings', { json: {} })).rejects.toMatchObject({
        status: 401,
        detail: 'Not authenticated',
      });
      h.answer(401, { detail: 'Not authenticated' });
      await h.store.verify();
      expect(h.fetch).toHaveBeenCalledTimes(3);
    });

    it('on the login page (a wrong password) clears the state but stays, keeping its next', async () => {
      h.goTo('/app/login?next=%2Fapp%2Fexecutions');
      h.answer(401, { detail: 'Invalid username or password' });
      await expect(h.store.login({ username: 'alice', password: 'wrong-one' })).rejects.toMatchObject({
        status: 401,
        detail: 'Invalid username or password',
      });
      expect(h.store.current().isAuthenticated).toBe(false);
      expect(h.navigations).toEqual([]);
    });

    it('never remembers an address outside the app', () => {
      expect(safeNext('/app/links?after=3')).toBe('/app/links?after=3');
      expect(safeNext('//evil.example/app/')).toBeNull();
      expect(safeNext('https://evil.example/app/')).toBeNull();
      expect(safeNext('/app/login?next=/app/links')).toBeNull();
      expect(safeNext('/urls')).toBeNull();
    });
  });

  describe('X-CSRF-Token', () => {
    it('goes on every non-GET request while a token is held, never on GET', async () => {
      h.answer(200, SESSION);
      await h.store.verify();
      for (const method of ['POST', 'PATCH', 'DELETE', 'PUT', 'GET']) {
        h.answer(200, {});
        await h.store.request(method, '/api/v1/anything', method === 'GET' ? {} : { json: {} });
      }
      const sentTokens = h.sent.slice(1).map((s) => [s.method, s.headers['x-csrf-token']]);
      expect(sentTokens).toEqual([
        ['POST', 'nonce.sig'],
        ['PATCH', 'nonce.sig'],
        ['DELETE', 'nonce.sig'],
        ['PUT', 'nonce.sig'],
        ['GET', undefined],
      ]);
      expect(h.sent[0]?.headers['x-csrf-token']).toBeUndefined();
    });

    it('goes on requests outside /api/ as well (POST /shorten, DELETE /{code})', async () => {
      h.answer(200, SESSION);
      await h.store.verify();
      h.answer(201, {});
      h.answer(204, {});
      await h.store.request('POST', '/shorten', { json: {} });
      await h.store.request('delete', '/abc123');
      expect(h.sent.slice(1).map((s) => s.headers['x-csrf-token'])).toEqual(['nonce.sig', 'nonce.sig']);
    });

    it('is absent while no token is held (before login, after a 401)', async () => {
      h.answer(201, {});
      await h.store.request('POST', '/api/v1/auth/register', { json: {} });
      expect(h.sent[0]?.headers['x-csrf-token']).toBeUndefined();

      h.answer(200, SESSION);
      await h.store.login({ username: 'alice', password: 'right-one' });
      h.answer(401, { detail: 'Not authenticated' });
      await h.store.request('DELETE', '/api/v1/notifications/channels/1');
      h.answer(200, {});
      await h.store.request('POST', '/api/v1/auth/logout');
      expect(h.sent.map((s) => s.headers['x-csrf-token'])).toEqual([undefined, undefined, 'nonce.sig', undefined]);
    });

    it('goes with a file sent as it is (an import), which keeps its own media type', async () => {
      h.answer(200, SESSION);
      await h.store.verify();
      const file = new Blob(['code,url\nabc1234,https://example.com/\n'], { type: 'text/csv' });
      h.answer(200, {});
      await h.store.request('POST', '/api/v1/links/import', { body: { content: file, type: 'text/csv' } });
      expect(h.sent[1]).toMatchObject({
        method: 'POST',
        headers: { 'content-type': 'text/csv', accept: 'application/json', 'x-csrf-token': 'nonce.sig' },
      });
      expect(h.sent[1]?.body).toBe(file);
    });

    it('uses the token of the newest login or verification', async () => {
      h.answer(200, SESSION);
      await h.store.login({ username: 'alice', password: 'right-one' });
      h.answer(200, { ...SESSION, csrf_token: 'reissued.token' });
      await h.store.verify({ force: true });
      h.answer(200, {});
      await h.store.request('POST', '/execute', { json: {} });
      expect(h.sent[2]?.headers['x-csrf-token']).toBe('reissued.token');
    });
  });

  it('asks for the media type it is told (a CSV download), JSON otherwise', async () => {
    h.answer(200, {});
    h.answer(200, {});
    await h.store.request('GET', '/api/v1/links/abc1234/visits', { accept: 'text/csv' });
    await h.store.request('GET', '/urls');
    expect(h.sent.map((s) => [s.headers.accept, s.headers['content-type'], s.body])).toEqual([
      ['text/csv', undefined, undefined],
      ['application/json', undefined, undefined],
    ]);
  });

  it('logout clears the state and goes to the login page even when the server cannot be reached', async () => {
    h.answer(200, SESSION);
    await h.store.verify();
    h.networkDown();
    await expect(h.store.logout()).rejects.toBeInstanceOf(NetworkError);
    expect(h.store.current().isAuthenticated).toBe(false);
    expect(h.navigations).toEqual(['/app/login']);
  });
});
