/**
 * A broker that is down when the service starts: the service starts anyway, answers writes
 * (the events wait in the outbox), reports NATS as not ready, and once NATS comes up the
 * consumers start and the events arrive.
 */
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { useTestApp } from '../helpers/app.js';
import { sqlite } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { HTTP_TEST_ENV, postShorten } from '../helpers/http.js';
import { natsServerBinaryAvailable, useOwnNatsServer } from '../helpers/own-nats-server.js';
import { storedCreatedByCode } from '../helpers/event-store.js';

describe('NATS down when the service starts', () => {
  const ok = natsServerBinaryAvailable();
  const prefix = `down${randomBytes(4).toString('hex')}_`;
  const nats = useOwnNatsServer(ok, { start: false }); // a port, but no server on it yet
  const { service } = useTestApp(
    sqlite,
    () => ({ ...HTTP_TEST_ENV, NATS_URL: nats.url, NATS_PREFIX: prefix, EVENT_POLL_MS: '50' }),
    { when: ok },
  );

  it.skipIf(!ok)('starts, takes writes, and delivers their events once NATS is up', async () => {
    const created = await postShorten(service.app, {
      code: 'natsdown1',
      url: 'https://example.com/down',
      created_at: '2024-01-01T00:00:00Z',
      click_count: 0,
    });
    expect(created.statusCode).toBe(201);
    const resolved = await service.app.inject({ method: 'GET', url: '/natsdown1' });
    expect(resolved.statusCode).toBe(302);
    const ready = await service.app.inject({ method: 'GET', url: '/health/ready' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json()).toMatchObject({ detail: 'nats is not available' });

    const db = service.database.db as unknown as Kysely<EventTables>;
    const outbox = await db.selectFrom('event_outbox').select('event_id').execute();
    expect(outbox.length).toBeGreaterThan(0);

    await nats.start();
    await eventually(
      async () => expect([...(await storedCreatedByCode(service.database.db)).keys()]).toEqual(['natsdown1']),
      { timeoutMs: 20_000 },
    );
    const readyAgain = await service.app.inject({ method: 'GET', url: '/health/ready' });
    expect(readyAgain.statusCode).toBe(200);
  });
});
