import { afterAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { postgres, useTestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, HTTP_TEST_ENV, newMapping, postShorten } from '../helpers/http.js';
import { deleteNatsStreams, uniqueNatsPrefix } from '../helpers/nats.js';
import { createdInStream } from '../helpers/outbox-census.js';
import { NATS_URL, natsAvailable } from '../helpers/services.js';

const available = postgres.available && (await natsAvailable());

/**
 * Distributed mode (PostgreSQL and NATS JetStream, two API instances): each link's `url.expired`
 * reaches the stream exactly once, whether it stopped by time with nobody visiting (both
 * instances sweep) or by its last visit taken among concurrent redirects on both.
 */
describe.skipIf(!available)('url.expired once on NATS with two instances', () => {
  const prefix = uniqueNatsPrefix('lfn');
  afterAll(async () => {
    if (available) await deleteNatsStreams(prefix);
  });
  const database = useTestDatabase(postgres, available);
  const env = { ...HTTP_TEST_ENV, EVENT_POLL_MS: '50' };
  const a = useTestApp(postgres, env, { database, natsPrefix: prefix, when: available });
  const b = useTestApp(postgres, env, { database, natsPrefix: prefix, when: available });
  const nextCode = codeMaker('lfn');

  it('one event per link stopped by time or by its visits', async () => {
    const timed: string[] = [];
    for (let i = 0; i < 10; i++) {
      const body = { ...newMapping(nextCode), expires_at: new Date(Date.now() + 1000).toISOString() };
      expect((await postShorten(i % 2 ? a : b, body)).statusCode).toBe(201);
      timed.push(body.code);
    }
    const limited = { ...newMapping(nextCode), max_visits: 5 };
    expect((await postShorten(a, limited)).statusCode).toBe(201);
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) => (i % 2 ? a : b).inject({ method: 'GET', url: `/${limited.code}` })),
    );
    expect(answers.filter((r) => r.statusCode === 302)).toHaveLength(5);
    expect(answers.filter((r) => r.statusCode === 410)).toHaveLength(25);

    const all = [...timed, limited.code];
    const inStream = await eventually(
      async () => {
        const found = await createdInStream(NATS_URL, prefix, 'url.expired');
        for (const code of all) expect(found.get(code)?.length, code).toBeGreaterThanOrEqual(1);
        return found;
      },
      { timeoutMs: 20_000, intervalMs: 250 },
    );
    for (const code of all) expect(inStream.get(code), code).toHaveLength(1);
  }, 40_000);
});
