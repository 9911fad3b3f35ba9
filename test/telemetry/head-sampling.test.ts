/**
 * Sampling decided before any span exists (RootSampling), and the active context carried by
 * promise hooks (PromiseContextManager). Tracing is process-wide, so it starts here, first, at a
 * rate so low that a new trace is never kept in practice: every request without a `traceparent`
 * is a dropped new trace, and the ones with a sampled `traceparent` are recorded (parent-based).
 */
import { createContextKey, propagation, ROOT_CONTEXT, SpanKind, trace, TraceFlags } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SamplingDecision,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { startTracing } from '../../src/adapters/telemetry/tracing.js';
import { testConfig } from '../helpers/backends.js';

const exporter = new InMemorySpanExporter();
const tracing = startTracing(testConfig('sqlite::memory:', { TRACING_SAMPLING_RATE: '0.000000001' }).tracing, {
  exporter,
});

import { setTimeout as sleep } from 'node:timers/promises';
import type { IncomingMessage } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { FastRedirect } from '../../src/http/fast-redirect.js';
import { startTraceBeforeRouting } from '../../src/http/plugins/request-tracing.js';
import { PromiseContextManager } from '../../src/adapters/telemetry/promise-context-manager.js';
import { RootSampling, rootSampling } from '../../src/adapters/telemetry/root-sampling.js';
import { AdaptiveSampler, RatioSampler, traceIdFraction, withParent } from '../../src/adapters/telemetry/samplers.js';
import { injectedHeaders } from '../../src/adapters/telemetry/message-tracing.js';
import { compose, type Service } from '../../src/composition/compose.js';
import type { Kysely } from 'kysely';
import { openDatabase } from '../../src/adapters/storage/database.js';
import type { EventTables } from '../../src/adapters/storage/schema.js';
import { BACKENDS, type TestDatabase } from '../helpers/backends.js';
import { eventually } from '../helpers/eventually.js';
import { codeMaker, newMapping } from '../helpers/http.js';

const nextCode = codeMaker('hds');
const SAMPLED_PARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const UNSAMPLED_PARENT = '00-1af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00';

afterAll(async () => {
  await tracing.shutdown();
});

describe('RootSampling', () => {
  it('decides like its root sampler on the trace id it hands out, and primes that id for the next root span', () => {
    const root = new RatioSampler(0.25);
    const roots = new RootSampling(withParent(root), root);
    let kept = 0;
    for (let i = 0; i < 4000; i++) {
      if (!roots.sampleNewTrace('GET /:code', SpanKind.SERVER)) continue;
      kept++;
      const traceId = roots.idGenerator.generateTraceId();
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(traceIdFraction(traceId)).toBeLessThan(0.25);
      const decision = roots.sampler.shouldSample(ROOT_CONTEXT, traceId, 'GET /:code', SpanKind.SERVER, {}, []);
      expect(decision.decision).toBe(SamplingDecision.RECORD_AND_SAMPLED);
      // Used once: the next trace id is a fresh one.
      expect(roots.idGenerator.generateTraceId()).not.toBe(traceId);
    }
    expect(kept).toBeGreaterThan(800);
    expect(kept).toBeLessThan(1200);
  });

  it("gives a dropped trace's request a span context its root sampler would drop again, with fresh ids", () => {
    const root = new RatioSampler(0.25);
    const roots = new RootSampling(withParent(root), root);
    const seen = new Set<string>();
    let dropped = 0;
    for (let i = 0; i < 4000; i++) {
      if (roots.sampleNewTrace('POST /shorten', SpanKind.SERVER)) {
        roots.idGenerator.generateTraceId(); // the primed id, handed out as the tracer would
        continue;
      }
      dropped++;
      const { traceId, spanId, traceFlags } = roots.droppedSpanContext();
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(spanId).toMatch(/^[0-9a-f]{16}$/);
      expect(traceFlags).toBe(TraceFlags.NONE);
      expect(traceIdFraction(traceId)).toBeGreaterThanOrEqual(0.25);
      const again = root.shouldSample(ROOT_CONTEXT, traceId);
      expect(again.decision).toBe(SamplingDecision.NOT_RECORD);
      seen.add(traceId).add(spanId);
    }
    expect(dropped).toBeGreaterThan(2800);
    expect(seen.size).toBe(dropped * 2);
  });

  it('never hands out an id of all zeros, even when every random draw is zero', () => {
    const root = new RatioSampler(0);
    const roots = new RootSampling(withParent(root), root);
    const random = vi.spyOn(Math, 'random').mockReturnValue(0);
    try {
      expect(roots.sampleNewTrace('POST /shorten', SpanKind.SERVER)).toBe(false);
      expect(roots.droppedSpanContext()).toEqual({
        traceId: `${'0'.repeat(31)}1`,
        spanId: `${'0'.repeat(15)}1`,
        traceFlags: TraceFlags.NONE,
      });
    } finally {
      random.mockRestore();
    }
  });

  it('asks the adaptive sampler once per new trace, kept or not', () => {
    const clock = { ms: 0 };
    const root = new AdaptiveSampler({ targetPerSecond: 1_000_000, maxProbability: 1, now: () => clock.ms });
    let asked = 0;
    const counting = Object.assign(Object.create(root) as AdaptiveSampler, {
      sampleFraction: (fraction: number) => {
        asked++;
        return root.sampleFraction(fraction);
      },
    });
    const roots = new RootSampling(withParent(counting), counting);
    expect(roots.sampleNewTrace('GET /:code', SpanKind.SERVER)).toBe(true);
    const traceId = roots.idGenerator.generateTraceId();
    roots.sampler.shouldSample(ROOT_CONTEXT, traceId, 'GET /:code', SpanKind.SERVER, {}, []);
    expect(asked).toBe(1);
  });

  it("hands a kept trace's root span the span id drawn with its trace id, once; other spans draw their own", () => {
    const root = new RatioSampler(1);
    const roots = new RootSampling(withParent(root), root);
    const exported = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({
      sampler: roots.sampler,
      idGenerator: roots.idGenerator,
      spanProcessors: [new SimpleSpanProcessor(exported)],
    });
    const tracer = provider.getTracer('head-sampling');
    const random = vi.spyOn(Math, 'random');
    expect(roots.sampleNewTrace('GET /:code', SpanKind.SERVER)).toBe(true);
    const draws = random.mock.calls.length;
    const kept = tracer.startSpan('GET /:code', { kind: SpanKind.SERVER }, ROOT_CONTEXT);
    // The SDK asked for both ids and got the primed ones: no random number drawn for them.
    expect(random.mock.calls.length).toBe(draws);
    random.mockRestore();
    const ids = kept.spanContext();
    expect(ids.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(ids.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(ids.traceFlags).toBe(TraceFlags.SAMPLED);
    const child = tracer.startSpan('child', {}, trace.setSpan(ROOT_CONTEXT, kept));
    const next = tracer.startSpan('another root', { root: true });
    expect(child.spanContext().traceId).toBe(ids.traceId);
    expect(new Set([ids.spanId, child.spanContext().spanId, next.spanContext().spanId]).size).toBe(3);
    expect(next.spanContext().traceId).not.toBe(ids.traceId);
  });

  it("a server span's context made before routing reads, adds and removes values as the API's own context does", () => {
    const raw = {
      method: 'GET',
      url: '/abcdefg',
      httpVersion: '1.1',
      headers: { host: 'sho.rt:8080' },
      socket: { remoteAddress: '127.0.0.1', localPort: 8080 },
    } as unknown as IncomingMessage;
    const { span, context: active } = startTraceBeforeRouting(raw, 'GET /:code', '/:code');
    const made = trace.setSpan(ROOT_CONTEXT, span);
    expect(trace.getSpan(active)).toBe(span);
    const key = createContextKey('head-sampling test');
    const added = active.setValue(key, 42);
    expect(added.getValue(key)).toBe(42);
    expect(trace.getSpan(added)).toBe(span);
    expect(active.getValue(key)).toBeUndefined();
    expect(active.deleteValue(key)).toBe(active);
    expect(trace.getSpan(trace.deleteSpan(active))).toBeUndefined();
    const carried: Record<string, string> = {};
    const expected: Record<string, string> = {};
    propagation.inject(active, carried);
    propagation.inject(made, expected);
    expect(carried).toEqual(expected);
    expect(carried.traceparent).toContain(span.spanContext().spanId);
    span.end();
  });

  it('is installed while tracing runs', () => {
    expect(rootSampling()).toBeDefined();
  });
});

describe('PromiseContextManager', () => {
  const key = createContextKey('test key');
  const manager = new PromiseContextManager().enable();
  afterAll(() => manager.disable());
  const value = () => manager.active().getValue(key);

  it('keeps the context across awaits, and restores the outer one when `with` returns', async () => {
    const inner = ROOT_CONTEXT.setValue(key, 'inner');
    const seen: unknown[] = [];
    const running = manager.with(inner, async () => {
      seen.push(value());
      await Promise.resolve();
      seen.push(value());
      await sleep(5);
      seen.push(value());
      await Promise.all([1, 2].map(async () => value())).then((values) => seen.push(...values));
    });
    expect(value()).toBeUndefined();
    await running;
    expect(seen).toEqual(['inner', 'inner', 'inner', 'inner', 'inner']);
    expect(value()).toBeUndefined();
  });

  it('keeps concurrent contexts apart', async () => {
    const run = (name: string, delay: number) =>
      manager.with(ROOT_CONTEXT.setValue(key, name), async () => {
        await sleep(delay);
        return value();
      });
    expect(await Promise.all([run('a', 10), run('b', 1), run('c', 5)])).toEqual(['a', 'b', 'c']);
  });

  it('carries the context into bound callbacks only: a raw timer callback runs in the root context', async () => {
    const inner = ROOT_CONTEXT.setValue(key, 'bound');
    const [bound, raw] = await manager.with(inner, () =>
      Promise.all([
        new Promise((resolve) =>
          setTimeout(
            manager.bind(inner, () => resolve(value())),
            1,
          ),
        ),
        new Promise((resolve) => setTimeout(() => resolve(value()), 1)),
      ]),
    );
    expect(bound).toBe('bound');
    expect(raw).toBeUndefined();
  });
});

/** One GET over a bare socket, no client instrumentation involved: the raw answer. */
function rawGet(port: number, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let received = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('error', reject);
    socket.on('end', () => resolve(received));
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  });
}

describe('requests with tracing at a rate that keeps no new trace', () => {
  const sqliteBackend = BACKENDS.find((b) => b.name === 'sqlite')!;
  let database: TestDatabase;
  let service: Service;
  const seen: { traceId?: string; flags?: number; afterAwait?: string; recording?: boolean }[] = [];

  beforeAll(async () => {
    database = await sqliteBackend.create();
    service = await compose(testConfig(database.databaseUrl, { TRACING_SAMPLING_RATE: '0.000000001' }), {
      logger: false,
    });
    // A route that reports the active span, before and after an await.
    service.app.get('/test-probe/context', async () => {
      const span = trace.getActiveSpan();
      await sleep(1);
      seen.push({
        traceId: span?.spanContext().traceId,
        flags: span?.spanContext().traceFlags,
        afterAwait: trace.getActiveSpan()?.spanContext().traceId,
        recording: span?.isRecording(),
      });
      return {};
    });
    // A route that changes data: what an event published in it would carry.
    service.app.post('/test-probe/context', async () => {
      const span = trace.getActiveSpan();
      await sleep(1);
      return {
        recording: span?.isRecording(),
        flags: span?.spanContext().traceFlags,
        traceId: span?.spanContext().traceId,
        headers: injectedHeaders('probe.sent', 'test'),
      };
    });
    await service.app.ready();
  });

  afterAll(async () => {
    await service.close();
    await database.drop();
  });

  beforeEach(() => {
    exporter.reset();
    seen.length = 0;
  });

  it('a new trace that is dropped: no span at all, no active context, no statement spans', async () => {
    const body = newMapping(nextCode);
    const created = await service.app.inject({ method: 'POST', url: '/shorten', payload: body });
    expect(created.statusCode, created.body).toBe(201);
    expect((await service.app.inject({ method: 'GET', url: `/${body.code}` })).statusCode).toBe(302);
    expect((await service.app.inject({ method: 'GET', url: '/test-probe/context' })).statusCode).toBe(200);
    await tracing.forceFlush();
    expect(exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER)).toEqual([]);
    expect(exporter.getFinishedSpans().filter((s) => s.name.startsWith('INSERT'))).toEqual([]);
    expect(seen).toEqual([{ traceId: undefined, flags: undefined, afterAwait: undefined, recording: undefined }]);
  });

  it('over HTTP, a redirect whose new trace is dropped is answered by the fast path: no span at all', async () => {
    const body = newMapping(nextCode);
    expect((await service.app.inject({ method: 'POST', url: '/shorten', payload: body })).statusCode).toBe(201);
    await service.app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = service.app.server.address() as AddressInfo;
    const answered = vi.spyOn(FastRedirect.prototype, 'redirect');
    try {
      for (let i = 0; i < 3; i++) {
        // A bare socket: fetch would send the `traceparent` of its own (dropped) client span.
        const answer = await rawGet(port, `/${body.code}`);
        expect(answer).toMatch(/^HTTP\/1\.1 302 Found\r\n/);
        expect(answer).toContain(`\r\nlocation: ${body.url}\r\n`);
      }
      expect(answered).toHaveBeenCalledTimes(3);
    } finally {
      answered.mockRestore();
    }
    await tracing.forceFlush();
    expect(exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER)).toEqual([]);
    expect(exporter.getFinishedSpans().filter((s) => s.name.startsWith('SELECT'))).toEqual([]);
  });

  it('a sampled incoming traceparent is followed: a recording server span, active across awaits, statements below it', async () => {
    const body = newMapping(nextCode);
    const created = await service.app.inject({
      method: 'POST',
      url: '/shorten',
      payload: body,
      headers: { traceparent: SAMPLED_PARENT },
    });
    expect(created.statusCode, created.body).toBe(201);
    const probe = await service.app.inject({
      method: 'GET',
      url: '/test-probe/context',
      headers: { traceparent: SAMPLED_PARENT },
    });
    expect(probe.statusCode).toBe(200);
    await tracing.forceFlush();
    const servers = exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER);
    expect(servers.map((s) => s.name).sort()).toEqual(['GET /test-probe/context', 'POST /shorten']);
    for (const server of servers) {
      expect(server.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
      expect(server.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    }
    const shorten = servers.find((s) => s.name === 'POST /shorten')!;
    const insert = exporter
      .getFinishedSpans()
      .find((s) => s.name === 'INSERT url_mappings' && s.parentSpanContext?.spanId === shorten.spanContext().spanId);
    expect(insert).toBeDefined();
    expect(seen).toEqual([
      {
        traceId: '0af7651916cd43dd8448eb211c80319c',
        flags: TraceFlags.SAMPLED,
        afterAwait: '0af7651916cd43dd8448eb211c80319c',
        recording: true,
      },
    ]);
  });

  it('an unsampled incoming traceparent: a non-recording span carries its decision through the request', async () => {
    const probe = await service.app.inject({
      method: 'GET',
      url: '/test-probe/context',
      headers: { traceparent: UNSAMPLED_PARENT },
    });
    expect(probe.statusCode).toBe(200);
    await tracing.forceFlush();
    expect(exporter.getFinishedSpans().filter((s) => s.kind === SpanKind.SERVER)).toEqual([]);
    expect(seen).toEqual([
      {
        traceId: '1af7651916cd43dd8448eb211c80319c',
        flags: TraceFlags.NONE,
        afterAwait: '1af7651916cd43dd8448eb211c80319c',
        recording: false,
      },
    ]);
  });

  it('a new trace that is dropped on a route that changes data: its events carry the drop', async () => {
    const response = await service.app.inject({ method: 'POST', url: '/test-probe/context', payload: {} });
    expect(response.statusCode, response.body).toBe(200);
    const { recording, flags, traceId, headers } = response.json<{
      recording: boolean;
      flags: number;
      traceId: string;
      headers: { traceparent: string };
    }>();
    expect(recording).toBe(false);
    expect(flags).toBe(TraceFlags.NONE);
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(traceId).not.toBe('0'.repeat(32));
    // Injected after an await: the non-recording span is still the active one, and says "not sampled".
    expect(headers.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
    await tracing.forceFlush();
    // Nothing of this trace is recorded (consumer spans of an earlier test's trace may still end now).
    expect(exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId)).toEqual([]);
  });

  it('POST /shorten whose new trace is dropped: its event carries the drop, and no span is made for it anywhere', async () => {
    const body = newMapping(nextCode);
    const created = await service.app.inject({ method: 'POST', url: '/shorten', payload: body });
    expect(created.statusCode, created.body).toBe(201);
    const reader = openDatabase(testConfig(database.databaseUrl).database);
    try {
      const db = reader.db as unknown as Kysely<EventTables>;
      const entries = await db.selectFrom('event_log').select(['headers', 'envelope']).execute();
      const entry = entries.find(
        (e) => (JSON.parse(e.envelope) as { payload: { code: string } }).payload.code === body.code,
      );
      // The request's own (non-recording) context goes on as it is: its trace, "not sampled".
      const { traceparent } = JSON.parse(entry!.headers) as { traceparent: string };
      expect(traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
      const traceId = traceparent.split('-')[1]!;
      // Consumed (the event store has it) in that same dropped trace: no producer nor consumer span.
      await eventually(async () => {
        const stored = await db
          .selectFrom('event_store')
          .select('event_id')
          .where('event_type', '=', 'url.created')
          .execute();
        return stored.length > 0 && stored.some((row) => entries.some((e) => e.envelope.includes(row.event_id)));
      });
      await tracing.forceFlush();
      expect(exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId)).toEqual([]);
    } finally {
      await reader.close();
    }
  });
});
