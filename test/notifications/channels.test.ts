/**
 * `/api/v1/notifications/channels`: create (the webhook secret is shown once), list (never a
 * secret), delete, someone else's channel, CSRF, sessions, validation, and the SSRF guard at
 * creation (on by default), where the user sees the refusal: every form of a private address,
 * IPv6 transition forms included (issue 16), while a public address is accepted.
 */
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { type Session, signUp } from '../helpers/auth.js';
import { BACKENDS } from '../helpers/backends.js';
import { expectError } from '../helpers/http.js';

const BASE = '/api/v1/notifications/channels';

interface ChannelBody {
  id: string;
  type: string;
  name: string;
  url: string;
  created_at: string;
  secret?: string;
}

function create(app: FastifyInstance, headers: Record<string, string>, body: unknown): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'POST',
    url: BASE,
    headers: { 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(body),
  });
}

const list = (app: FastifyInstance, headers: Record<string, string>) =>
  app.inject({ method: 'GET', url: BASE, headers });
const remove = (app: FastifyInstance, headers: Record<string, string>, id: string) =>
  app.inject({ method: 'DELETE', url: `${BASE}/${id}`, headers });

describe.each(BACKENDS)('notification channels API on $name', (backend) => {
  /** With the guard off, as tests with receivers on 127.0.0.1 run; room for the many channels below. */
  const open = useTestApp(
    backend,
    { NOTIFICATIONS_ALLOW_PRIVATE: 'true', NOTIFICATION_MAX_CHANNELS_PER_USER: '100' },
    { accounts: true },
  );
  /** The default: the SSRF guard on. */
  const guarded = useTestApp(backend, {}, { accounts: true });
  const alice = open.user('cha');
  const bob = open.user('chb');

  it.skipIf(!backend.available)(
    'create webhook → 201 with a whsec_ secret shown once; list never shows secrets',
    async () => {
      const created = await create(open.app, alice.headers, {
        type: 'webhook',
        name: 'ops hook',
        url: 'http://127.0.0.1:9/hook',
      });
      expect(created.statusCode, created.body).toBe(201);
      const body = created.json<ChannelBody>();
      expect(body).toEqual({
        id: expect.any(String),
        type: 'webhook',
        name: 'ops hook',
        url: 'http://127.0.0.1:9/hook',
        created_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/),
        secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]+={0,2}$/),
      });
      // 24 random bytes behind the prefix.
      expect(Buffer.from(body.secret!.slice('whsec_'.length), 'base64')).toHaveLength(24);

      const chat = await create(open.app, alice.headers, {
        type: 'chat',
        name: 'team room',
        url: 'http://127.0.0.1:9/chat',
      });
      expect(chat.statusCode, chat.body).toBe(201);
      expect(chat.json()).not.toHaveProperty('secret');

      const listed = await list(open.app, { cookie: alice.cookie });
      expect(listed.statusCode, listed.body).toBe(200);
      const channels = listed.json<ChannelBody[]>();
      expect(channels.map((c) => c.id)).toEqual([body.id, chat.json<ChannelBody>().id]);
      for (const channel of channels) {
        expect(Object.keys(channel).sort()).toEqual(['created_at', 'id', 'name', 'type', 'url']);
      }
      expect(listed.body).not.toContain(body.secret!);
      expect(listed.body).not.toContain('whsec_');
    },
  );

  it.skipIf(!backend.available)('lists channels in creation order, however close together they were made', async () => {
    const before = (await list(open.app, { cookie: alice.cookie })).json<ChannelBody[]>().map((c) => c.id);
    const made: string[] = [];
    // Many within the same few milliseconds: timestamps whose trimmed fractions (.12Z, .123Z)
    // do not sort as text must not decide the order.
    for (let i = 0; i < 25; i++) {
      const created = await create(open.app, alice.headers, {
        type: 'chat',
        name: `o${i}`,
        url: 'http://127.0.0.1:9/o',
      });
      expect(created.statusCode, created.body).toBe(201);
      made.push(created.json<ChannelBody>().id);
    }
    const after = (await list(open.app, { cookie: alice.cookie })).json<ChannelBody[]>().map((c) => c.id);
    expect(after).toEqual([...before, ...made]);
  });

  it.skipIf(!backend.available)('each webhook gets its own secret', async () => {
    const secrets = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const created = await create(open.app, alice.headers, {
        type: 'webhook',
        name: `h${i}`,
        url: 'http://127.0.0.1:9/',
      });
      secrets.add(created.json<ChannelBody>().secret!);
    }
    expect(secrets.size).toBe(3);
  });

  it.skipIf(!backend.available)('delete → 204, then gone; deleting again → 404', async () => {
    const created = await create(open.app, bob.headers, { type: 'chat', name: 'doomed', url: 'http://127.0.0.1:9/x' });
    const { id } = created.json<ChannelBody>();
    const deleted = await remove(open.app, bob.headers, id);
    expect(deleted.statusCode, deleted.body).toBe(204);
    expect(deleted.body).toBe('');
    expect((await list(open.app, { cookie: bob.cookie })).json<ChannelBody[]>().map((c) => c.id)).not.toContain(id);
    expectError(await remove(open.app, bob.headers, id), 404, 'Notification channel not found');
  });

  it.skipIf(!backend.available)("someone else's channel → 404 and stays; lists are per user", async () => {
    const created = await create(open.app, alice.headers, {
      type: 'chat',
      name: 'alice only',
      url: 'http://127.0.0.1:9/a',
    });
    const { id } = created.json<ChannelBody>();
    expectError(await remove(open.app, bob.headers, id), 404, 'Notification channel not found');
    expect((await list(open.app, { cookie: alice.cookie })).json<ChannelBody[]>().map((c) => c.id)).toContain(id);
    expect((await list(open.app, { cookie: bob.cookie })).json<ChannelBody[]>().map((c) => c.id)).not.toContain(id);
  });

  it.skipIf(!backend.available)('CSRF applies: a missing X-CSRF-Token → 403 on create and delete', async () => {
    const created = await create(open.app, alice.headers, { type: 'chat', name: 'kept', url: 'http://127.0.0.1:9/k' });
    const { id } = created.json<ChannelBody>();
    const before = (await list(open.app, { cookie: alice.cookie })).json<ChannelBody[]>().length;

    expectError(
      await create(open.app, { cookie: alice.cookie }, { type: 'chat', name: 'x', url: 'http://127.0.0.1:9/' }),
      403,
    );
    expectError(await remove(open.app, { cookie: alice.cookie }, id), 403);
    // A token that is not the cookie's.
    expectError(
      await create(
        open.app,
        { cookie: alice.cookie, 'x-csrf-token': bob.csrfToken },
        { type: 'chat', name: 'x', url: 'http://127.0.0.1:9/' },
      ),
      403,
    );
    expect((await list(open.app, { cookie: alice.cookie })).json<ChannelBody[]>()).toHaveLength(before);
  });

  it.skipIf(!backend.available)('401 without a session', async () => {
    expectError(await list(open.app, {}), 401);
    // No session cookie: CSRF has nothing to protect (spec §5.4 step 4); authentication answers 401.
    const body = { type: 'chat', name: 'x', url: 'http://127.0.0.1:9/' };
    expectError(await create(open.app, {}, body), 401);
    expectError(
      await create(open.app, { cookie: `csrf_token=${alice.csrfToken}`, 'x-csrf-token': alice.csrfToken }, body),
      401,
    );
    const { id } = (await create(open.app, alice.headers, body)).json<ChannelBody>();
    expectError(await remove(open.app, {}, id), 401);
    expectError(await list(open.app, { cookie: 'access_token=not-a-token' }), 401);
  });

  it.skipIf(!backend.available)('422 for a bad type, url or name', async () => {
    const cases: [string, unknown, string][] = [
      ['an unknown type', { type: 'email', name: 'n', url: 'http://127.0.0.1:9/' }, 'type'],
      ['no type', { name: 'n', url: 'http://127.0.0.1:9/' }, 'type'],
      ['a relative url', { type: 'webhook', name: 'n', url: '/hook' }, 'url'],
      ['not a url', { type: 'webhook', name: 'n', url: 'not a url' }, 'url'],
      ['an ftp url', { type: 'webhook', name: 'n', url: 'ftp://127.0.0.1/hook' }, 'url'],
      ['a javascript: url', { type: 'chat', name: 'n', url: 'javascript:alert(1)' }, 'url'],
      ['an empty url', { type: 'webhook', name: 'n', url: '' }, 'url'],
      [
        'a url over 2048 characters',
        { type: 'webhook', name: 'n', url: `http://127.0.0.1/${'a'.repeat(2048)}` },
        'url',
      ],
      ['no url', { type: 'webhook', name: 'n' }, 'url'],
      ['an empty name', { type: 'webhook', name: '', url: 'http://127.0.0.1:9/' }, 'name'],
      ['a name over 100 characters', { type: 'webhook', name: 'n'.repeat(101), url: 'http://127.0.0.1:9/' }, 'name'],
      ['no name', { type: 'webhook', url: 'http://127.0.0.1:9/' }, 'name'],
      ['an unknown field', { type: 'webhook', name: 'n', url: 'http://127.0.0.1:9/', secret: 'mine' }, 'secret'],
    ];
    const before = (await list(open.app, { cookie: alice.cookie })).json<ChannelBody[]>().length;
    for (const [name, body, field] of cases) {
      const response = await create(open.app, alice.headers, body);
      expect(response.statusCode, `${name}: ${response.body}`).toBe(422);
      expectError(response, 422, new RegExp(`\\b${field}\\b`));
    }
    expect((await list(open.app, { cookie: alice.cookie })).json<ChannelBody[]>()).toHaveLength(before);
  });

  describe('the SSRF guard (NOTIFICATIONS_ALLOW_PRIVATE unset)', () => {
    let carol: Session;
    beforeAll(async () => {
      if (!backend.available) return;
      carol = (await signUp(guarded.app, 'chg')).session;
    });

    it.skipIf(!backend.available)('a channel pointing at a private address is refused with 422', async () => {
      for (const url of [
        'http://127.0.0.1:8080/hook',
        'http://localhost/hook',
        'http://10.1.2.3/hook',
        'http://172.16.0.1/hook',
        'http://192.168.1.1/hook',
        'http://169.254.169.254/latest/meta-data/',
        'http://100.64.0.1/hook',
        'http://[::1]/hook',
        'http://[fc00::1]/hook',
        'http://[fe80::1]/hook',
        'http://[::ffff:127.0.0.1]/hook',
        'http://0.0.0.0/hook',
        'https://2130706433/hook', // 127.0.0.1 written as one number
      ]) {
        for (const type of ['webhook', 'chat']) {
          const response = await create(guarded.app, carol.headers, { type, name: 'inside', url });
          expect(response.statusCode, `${type} ${url}: ${response.body}`).toBe(422);
          expectError(response, 422, /\burl\b/);
        }
      }
      expect((await list(guarded.app, { cookie: carol.cookie })).json()).toEqual([]);
    });

    it.skipIf(!backend.available)(
      'an IPv6 form of a refused address, or a transition or site-local range, is refused with 422',
      async () => {
        for (const url of [
          'http://[::127.0.0.1]/hook', // IPv4-compatible (::/96), dotted
          'http://[::7f00:1]/hook', // the same, in hex
          'http://[::a00:1]/hook', // IPv4-compatible 10.0.0.1
          'http://[2002:7f00:1::]/hook', // 6to4 of 127.0.0.1
          'http://[2002:a9fe:a9fe::1]/hook', // 6to4 of 169.254.169.254
          'http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/hook', // Teredo, client 10.0.0.1
          'http://[fec0::1]/hook', // site-local
          'http://[64:ff9b::a00:1]/hook', // NAT64 of 10.0.0.1
          'http://[64:ff9b:1::7f00:1]/hook', // local-use NAT64
          'http://[::ffff:10.0.0.1]/hook', // IPv4-mapped
          'http://[::ffff:a9fe:a9fe]/hook', // IPv4-mapped metadata, in hex
          'http://[::ffff:0:a00:1]/hook', // IPv4-translated
        ]) {
          for (const type of ['webhook', 'chat']) {
            const response = await create(guarded.app, carol.headers, { type, name: 'inside', url });
            expectError(response, 422, /^body: 'url' Destination not allowed: /);
          }
        }
        expect((await list(guarded.app, { cookie: carol.cookie })).json()).toEqual([]);
      },
    );

    it.skipIf(!backend.available)(
      'a public address is accepted (checked at creation without dialling it)',
      async () => {
        const made: string[] = [];
        for (const url of [
          'http://93.184.216.34/hook',
          'https://[2606:4700:4700::1111]/hook',
          'http://[::ffff:8.8.8.8]/hook', // IPv4-mapped public: it stands for 8.8.8.8
        ]) {
          const response = await create(guarded.app, carol.headers, { type: 'webhook', name: 'outside', url });
          expect(response.statusCode, `${url}: ${response.body}`).toBe(201);
          made.push(response.json<ChannelBody>().id);
        }
        const listed = (await list(guarded.app, { cookie: carol.cookie })).json<ChannelBody[]>();
        expect(listed.map((c) => c.id)).toEqual(made);
        for (const id of made) expect((await remove(guarded.app, carol.headers, id)).statusCode).toBe(204);
      },
    );

    it.skipIf(!backend.available)('a host that cannot be resolved is refused with 422', async () => {
      const response = await create(guarded.app, carol.headers, {
        type: 'webhook',
        name: 'nowhere',
        url: 'http://no-such-host.invalid/hook',
      });
      expectError(response, 422, /\burl\b/);
    });
  });

  describe('at most NOTIFICATION_MAX_CHANNELS_PER_USER channels a user', () => {
    const MAX = 3;
    const DETAIL = `A user may have at most ${MAX} notification channels; delete one first`;
    const limited = useTestApp(
      backend,
      { NOTIFICATIONS_ALLOW_PRIVATE: 'true', NOTIFICATION_MAX_CHANNELS_PER_USER: String(MAX) },
      { accounts: true },
    );
    const dave = limited.user('chd');
    const erin = limited.user('che');
    const frank = limited.user('chf');
    const body = (n: number) => ({ type: 'chat', name: `c${n}`, url: `http://127.0.0.1:9/c${n}` });
    const ids = async (session: Session) =>
      (await list(limited.app, { cookie: session.cookie })).json<ChannelBody[]>().map((c) => c.id);

    it.skipIf(!backend.available)(
      'one more → 409 with a {detail}, nothing stored; other users unaffected; room again after a delete',
      async () => {
        const made: string[] = [];
        for (let n = 0; n < MAX; n++) {
          const created = await create(limited.app, dave.headers, body(n));
          expect(created.statusCode, created.body).toBe(201);
          made.push(created.json<ChannelBody>().id);
        }
        expectError(await create(limited.app, dave.headers, body(MAX)), 409, DETAIL);
        expectError(await create(limited.app, dave.headers, { ...body(MAX), type: 'webhook' }), 409, DETAIL);
        expect(await ids(dave)).toEqual(made);
        // The limit is each user's own.
        const erins = await create(limited.app, erin.headers, body(0));
        expect(erins.statusCode, erins.body).toBe(201);
        // A deleted channel makes room for one, and only one.
        expect((await remove(limited.app, dave.headers, made[0]!)).statusCode).toBe(204);
        const again = await create(limited.app, dave.headers, body(MAX + 1));
        expect(again.statusCode, again.body).toBe(201);
        expectError(await create(limited.app, dave.headers, body(MAX + 2)), 409, DETAIL);
        expect(await ids(dave)).toEqual([...made.slice(1), again.json<ChannelBody>().id]);
      },
    );

    it.skipIf(!backend.available)(
      'many creations at once: exactly the limit acknowledged and stored, the rest 409',
      async () => {
        const answers = await Promise.all(
          Array.from({ length: 4 * MAX }, (_, n) => create(limited.app, frank.headers, body(n))),
        );
        const acknowledged = answers.filter((a) => a.statusCode === 201).map((a) => a.json<ChannelBody>().id);
        for (const answer of answers.filter((a) => a.statusCode !== 201)) expectError(answer, 409, DETAIL);
        expect(acknowledged).toHaveLength(MAX);
        expect((await ids(frank)).sort()).toEqual([...acknowledged].sort());
      },
    );
  });
});
