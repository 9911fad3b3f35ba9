/**
 * Background database writes have spans (spec §6.2 rule 1; issue 16): the event store's batch
 * writes (linked to the messages they store), click flushes (with the `url.clicked` producer span
 * below), click compaction, the event retention clean-up, visit flushes and merges, visit retention and the
 * link expiry sweep (with the `url.expired` producer span below), each with its SQL statements as
 * children. Recorded with an in-memory span exporter; tracing is process-wide, so it starts here,
 * first, and this file runs in a process of its own.
 */
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind } from '@opentelemetry/api';
import { startTracing } from '../../src/adapters/telemetry/tracing.js';
import { testConfig } from '../helpers/backends.js';

const exporter = new InMemorySpanExporter();
const TRACING_ENV = { TRACING_SAMPLING_RATE: '1' };
const tracing = startTracing(testConfig('sqlite::memory:', TRACING_ENV).tracing, { exporter });

import { afterAll, describe, expect, it } from 'vitest';
import { useTestApp } from '../helpers/app.js';
import { BACKENDS } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, newMapping } from '../helpers/http.js';

const nextCode = codeMaker('bgs');
const spans = () => exporter.getFinishedSpans();
const spanId = (s: ReadableSpan) => s.spanContext().spanId;
const childrenOf = (parent: ReadableSpan) => spans().filter((s) => s.parentSpanContext?.spanId === spanId(parent));

afterAll(async () => {
  await tracing.shutdown();
});

for (const backend of BACKENDS) {
  describe(`background database writes on ${backend.name}`, () => {
    const t = useTestApp(backend, { ...TRACING_ENV, CLICK_FLUSH_INTERVAL_MS: '50', EVENT_POLL_MS: '50' });

    /** A finished span matching `match` whose statements (children) are there too. */
    const withStatements = (description: string, match: (s: ReadableSpan) => boolean) =>
      eventually(() => {
        const found = spans().find((s) => match(s) && childrenOf(s).some((c) => c.kind === SpanKind.CLIENT));
        if (!found) throw new Error(`no ${description} span with statements yet`);
        return found;
      });

    /** Creates a link and follows it `times` times (each a counted 302: a click and a visit). */
    const createAndFollow = async (times: number) => {
      const body = newMapping(nextCode);
      expect((await t.inject({ method: 'POST', url: '/shorten', payload: body })).statusCode).toBe(201);
      for (let i = 0; i < times; i++)
        expect((await t.inject({ method: 'GET', url: `/${body.code}` })).statusCode).toBe(302);
    };

    it.skipIf(!backend.available)(
      "an event store batch: a span with its statements, linked to the events' producer spans",
      async () => {
        const body = newMapping(nextCode);
        expect((await t.inject({ method: 'POST', url: '/shorten', payload: body })).statusCode).toBe(201);
        const producer = await eventually(() => {
          const found = spans().find(
            (s) =>
              s.kind === SpanKind.PRODUCER &&
              s.name === 'publish url_events' &&
              s.attributes['event.type'] === 'url.created',
          );
          if (!found) throw new Error('no producer span yet');
          return found;
        });
        const batch = await withStatements('event_store.append', (s) =>
          s.links.some((l) => l.context.spanId === spanId(producer)),
        );
        expect(batch.name).toBe('event_store.append');
        expect(batch.parentSpanContext).toBeUndefined(); // a trace of its own, linked to the events'
        expect(batch.attributes['messaging.batch.message_count']).toBeGreaterThanOrEqual(1);
        const statements = childrenOf(batch).map((s) => s.name);
        expect(
          statements.some((name) => name.endsWith('event_store')),
          statements.join(', '),
        ).toBe(true);
      },
    );

    it.skipIf(!backend.available)(
      'a click flush: a span with its statements and the url.clicked producer span below it',
      async () => {
        await createAndFollow(3);
        const flush = await withStatements('clicks.flush', (s) => s.name === 'clicks.flush');
        expect(flush.kind).toBe(SpanKind.INTERNAL);
        expect(flush.attributes['urlshortener.clicks.mappings']).toBeGreaterThanOrEqual(1);
        const below = childrenOf(flush);
        expect(below.some((s) => s.kind === SpanKind.CLIENT && s.attributes['db.system.name'] !== undefined)).toBe(
          true,
        );
        expect(below.some((s) => s.kind === SpanKind.PRODUCER && s.attributes['event.type'] === 'url.clicked')).toBe(
          true,
        );
      },
    );

    it.skipIf(!backend.available)('a click compaction: a span with its statements', async () => {
      await t.service.clicks.compact();
      const compaction = await withStatements('clicks.compact', (s) => s.name === 'clicks.compact');
      expect(compaction.parentSpanContext).toBeUndefined();
    });

    it.skipIf(!backend.available)('a visit flush: a span of its own with its statements', async () => {
      await createAndFollow(2);
      const flush = await withStatements('visits.flush', (s) => s.name === 'visits.flush');
      expect(flush.kind).toBe(SpanKind.INTERNAL);
      expect(flush.parentSpanContext).toBeUndefined();
      expect(flush.attributes['urlshortener.visits.count']).toBeGreaterThanOrEqual(1);
      expect(childrenOf(flush).map((s) => s.attributes['db.operation.name'])).toContain('INSERT');
    });

    it.skipIf(!backend.available)('a visit merge: a span per transaction with its statements', async () => {
      await createAndFollow(3);
      await t.service.visits.buffer!.flush();
      await t.service.visits.merge();
      const merge = await withStatements('visits.merge', (s) => s.name === 'visits.merge');
      expect(merge.kind).toBe(SpanKind.INTERNAL);
      expect(merge.parentSpanContext).toBeUndefined();
      expect(merge.attributes['urlshortener.visits.count']).toBeGreaterThanOrEqual(3);
      const statements = childrenOf(merge).map((s) => s.attributes['db.operation.name']);
      expect(statements).toContain('INSERT');
      expect(statements.some((name) => name === 'DELETE' || name === 'UPDATE')).toBe(true);
    });

    it.skipIf(!backend.available)('visit retention: a span per chunk with its statements', async () => {
      await t.service.visits.prune();
      const prune = await withStatements('visits.prune', (s) => s.name === 'visits.prune');
      expect(prune.parentSpanContext).toBeUndefined();
      expect(childrenOf(prune).map((s) => s.attributes['db.operation.name'])).toContain('DELETE');
    });

    it.skipIf(!backend.available)(
      'the link expiry sweep: a span with its statements and the url.expired producer span below it',
      async () => {
        // Expiring in a second, untouched: the sweep (every second) claims it and records url.expired.
        const expiresAt = new Date(Date.now() + 1000).toISOString();
        const body = { ...newMapping(nextCode), expires_at: expiresAt };
        const created = await t.inject({ method: 'POST', url: '/shorten', payload: body });
        expect(created.statusCode, created.body).toBe(201);
        const sweep = await withStatements(
          'links.expire',
          (s) =>
            s.name === 'links.expire' &&
            childrenOf(s).some((c) => c.kind === SpanKind.PRODUCER && c.attributes['event.type'] === 'url.expired'),
        );
        expect(sweep.kind).toBe(SpanKind.INTERNAL);
        expect(sweep.parentSpanContext).toBeUndefined();
        expect(childrenOf(sweep).map((s) => s.attributes['db.operation.name'])).toContain('UPDATE');
      },
    );

    it.skipIf(!backend.available)('the event retention clean-up: spans with their statements', async () => {
      // The service prunes once when it starts (the `all` role), then every hour.
      const store = await withStatements('event_store.prune', (s) => s.name === 'event_store.prune');
      const log = await withStatements('event_log.prune', (s) => s.name === 'event_log.prune');
      expect(childrenOf(store).map((s) => s.attributes['db.operation.name'])).toContain('DELETE');
      expect(childrenOf(log).map((s) => s.attributes['db.operation.name'])).toContain('DELETE');
    });
  });
}
