/**
 * Other instances drop cached redirects on `url.updated` / `url.deleted` (issue #5): two
 * composed apps on one PostgreSQL schema, sharing NATS JetStream (or the embedded log in that
 * database), with a cache TTL of an hour. A change through one stops the other serving the old
 * answer within 1 s (design: "within 1 s").
 */
import { describe, expect, it } from 'vitest';
import type { Service } from '../../src/composition/compose.js';
import { useTestApp } from '../helpers/app.js';
import { postgres, useTestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, createMapping, expectRedirect, HTTP_TEST_ENV, newMapping, patchMapping } from '../helpers/http.js';
import { NATS_URL, natsAvailable } from '../helpers/services.js';
import { uniqueNatsPrefix } from '../helpers/nats.js';

const natsUp = await natsAvailable();
const VARIANTS = [
  { name: 'NATS JetStream', nats: true },
  { name: 'the embedded log', nats: false },
];
const WITHIN_MS = 1000;

describe.each(VARIANTS)('cache invalidation across two instances on PostgreSQL + $name', (variant) => {
  const ok = postgres.available && (!variant.nats || natsUp);
  const nextCode = codeMaker(variant.nats ? 'cinv' : 'cine');
  const database = useTestDatabase(postgres, ok);
  const natsPrefix = variant.nats ? uniqueNatsPrefix('cinv') : undefined;
  const env = {
    ...HTTP_TEST_ENV,
    CACHE_TTL_MS: '3600000',
    ...(natsPrefix ? { NATS_URL, NATS_PREFIX: natsPrefix } : {}),
  };
  // A deletes the streams at close, after B has closed.
  const { service: a } = useTestApp(postgres, env, { database, natsPrefix, when: ok });
  const { service: b } = useTestApp(postgres, env, { database, when: ok });

  const resolve = (service: Service, code: string) => service.app.inject({ method: 'GET', url: `/${code}` });

  /** Waits (at most WITHIN_MS) until `check` holds. */
  const within = (check: () => Promise<void>) => eventually(check, { timeoutMs: WITHIN_MS, intervalMs: 20 });

  it.skipIf(!ok)('B serves from its cache: a change behind its back (no event) goes unseen', async () => {
    for (const s of [a, b])
      expect(s.events.bus.constructor.name).toBe(variant.nats ? 'NatsEventBus' : 'EmbeddedLogEventBus');
    const mapping = await createMapping(a.app, newMapping(nextCode, { url: 'https://example.com/cached' }));
    // Let B take in the url.created event (which drops whatever B cached for the code) first.
    await new Promise((r) => setTimeout(r, WITHIN_MS));
    expectRedirect(await resolve(b, mapping.code), 'https://example.com/cached');
    // Removed straight from the table, so no event: B keeps answering from its cache.
    await b.database.db.deleteFrom('url_mappings').where('code', '=', mapping.code).execute();
    await new Promise((r) => setTimeout(r, 1500));
    expectRedirect(await resolve(b, mapping.code), 'https://example.com/cached');
  });

  it.skipIf(!ok)('a code B looked up as unknown resolves on B within 1 s of its creation through A', async () => {
    const code = nextCode();
    expect((await resolve(b, code)).statusCode).toBe(404); // now cached as unknown on B
    await createMapping(
      a.app,
      newMapping(() => code, { url: 'https://example.com/born' }),
    );
    await within(async () => expectRedirect(await resolve(b, code), 'https://example.com/born'));
  });

  it.skipIf(!ok)('a delete through A stops B resolving within 1 s', async () => {
    const mapping = await createMapping(a.app, newMapping(nextCode, { url: 'https://example.com/doomed' }));
    expectRedirect(await resolve(b, mapping.code), 'https://example.com/doomed');
    expectRedirect(await resolve(b, mapping.code), 'https://example.com/doomed');
    const deleted = await a.app.inject({ method: 'DELETE', url: `/${mapping.code}` });
    expect(deleted.statusCode).toBe(204);
    await within(async () => expect((await resolve(b, mapping.code)).statusCode).toBe(404));
  });

  it.skipIf(!ok)('an update through A reaches B within 1 s; a renamed code stops resolving', async () => {
    const mapping = await createMapping(a.app, newMapping(nextCode, { url: 'https://example.com/old' }));
    expectRedirect(await resolve(b, mapping.code), 'https://example.com/old');
    const patched = await patchMapping(a.app, mapping.code, { url: 'https://example.com/new' });
    expect(patched.statusCode, patched.body).toBe(200);
    await within(async () => expectRedirect(await resolve(b, mapping.code), 'https://example.com/new'));

    expectRedirect(await resolve(a, mapping.code), 'https://example.com/new'); // now cached in A too
    const renamed = nextCode();
    const moved = await patchMapping(b.app, mapping.code, { code: renamed });
    expect(moved.statusCode, moved.body).toBe(200);
    await within(async () => expect((await resolve(a, mapping.code)).statusCode).toBe(404));
    expectRedirect(await resolve(a, renamed), 'https://example.com/new');
  });
});
