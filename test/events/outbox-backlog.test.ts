/**
 * The outbox's backlog is visible (issue 11): while NATS is stopped, writes are still
 * acknowledged, and `GET /health/ready` (503 naming NATS) and the `outbox_depth` /
 * `outbox_oldest_age_seconds` gauges show the events waiting and how long the oldest has waited;
 * once NATS is back, both return to 0 and readiness to 200. The backlog alone never makes the
 * service unready. Uses a nats-server of its own (never the shared one).
 */
import { describe, expect, it } from 'vitest';
import { metricValue } from '../helpers/auth.js';
import { useTestApp } from '../helpers/app.js';
import { postgres, sqlite } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, createMapping, HTTP_TEST_ENV, newMapping } from '../helpers/http.js';
import { natsServerBinaryAvailable, useOwnNatsServer } from '../helpers/own-nats-server.js';
import { uniqueNatsPrefix } from '../helpers/nats.js';

const backend = postgres.available ? postgres : sqlite;

interface Readiness {
  readonly status?: string;
  readonly detail?: string;
  readonly checks: Record<string, string>;
  readonly details?: Record<string, { outbox_depth: number; outbox_oldest_age_seconds: number }>;
}

describe(`the outbox backlog while NATS is away (${backend.name})`, () => {
  const ok = natsServerBinaryAvailable();
  const nextCode = codeMaker('blog');
  const nats = useOwnNatsServer(ok);
  const { service } = useTestApp(
    backend,
    () => ({ ...HTTP_TEST_ENV, NATS_URL: nats.url, NATS_PREFIX: uniqueNatsPrefix('blog'), EVENT_POLL_MS: '50' }),
    { when: ok },
  );

  const ready = async () => {
    const response = await service.app.inject({ url: '/health/ready' });
    return { status: response.statusCode, body: response.json<Readiness>() };
  };
  const gauge = (name: string) => metricValue(service.app, name);

  it.skipIf(!ok)('shows depth and age in readiness and metrics, and both drain once NATS returns', async () => {
    await createMapping(service.app, newMapping(nextCode));
    await eventually(async () => {
      const { status, body } = await ready();
      expect(status).toBe(200);
      expect(body.details).toEqual({ nats: { outbox_depth: 0, outbox_oldest_age_seconds: 0 } });
    });

    await nats.stop();
    for (let i = 0; i < 6; i++) await createMapping(service.app, newMapping(nextCode));
    await new Promise((resolve) => setTimeout(resolve, 1100)); // so that the oldest has waited a second
    const down = await eventually(async () => {
      const { status, body } = await ready();
      expect(status).toBe(503);
      expect(body.detail).toBe('nats is not available');
      expect(body.checks).toMatchObject({ database: 'ok', nats: 'unavailable' });
      expect(body.details?.nats?.outbox_depth).toBe(6);
      expect(body.details?.nats?.outbox_oldest_age_seconds).toBeGreaterThanOrEqual(1);
      return body;
    });
    expect(down.details?.nats?.outbox_oldest_age_seconds).toBeLessThan(60);
    expect(await gauge('outbox_depth')).toBe(6);
    expect(await gauge('outbox_oldest_age_seconds')).toBeGreaterThanOrEqual(1);

    await nats.start();
    await eventually(
      async () => {
        const { status, body } = await ready();
        expect(status).toBe(200);
        expect(body.details).toEqual({ nats: { outbox_depth: 0, outbox_oldest_age_seconds: 0 } });
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(await gauge('outbox_depth')).toBe(0);
    expect(await gauge('outbox_oldest_age_seconds')).toBe(0);
  });
});
