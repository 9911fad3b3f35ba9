import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RequestMetrics } from '../../src/adapters/telemetry/request-metrics.js';

const BUCKETS = [0.001, 0.01, 0.1, 1];
const LABELS = ['method', 'route', 'status_code'] as const;
const OBSERVATIONS: Array<[labels: { method: string; route: string; status_code: string }, seconds: number]> = [
  [{ method: 'GET', route: '/:code', status_code: '302' }, 0.0004],
  [{ method: 'GET', route: '/:code', status_code: '302' }, 0.001],
  [{ method: 'GET', route: '/:code', status_code: '302' }, 0.05],
  [{ method: 'GET', route: '/:code', status_code: '404' }, 2],
  [{ method: 'POST', route: '/shorten', status_code: '201' }, 0.2],
];

/** What prom-client's own Counter and Histogram print for the same observations. */
async function promClientText(): Promise<string> {
  const registry = new Registry();
  const counter = new Counter({ name: 'reqs_total', help: 'Requests.', labelNames: LABELS, registers: [registry] });
  const histogram = new Histogram({
    name: 'req_seconds',
    help: 'Latency.',
    labelNames: LABELS,
    buckets: BUCKETS,
    registers: [registry],
  });
  for (const [labels, seconds] of OBSERVATIONS) {
    counter.inc(labels);
    histogram.observe(labels, seconds);
  }
  return registry.metrics();
}

function requestMetrics(registry: Registry): RequestMetrics {
  return new RequestMetrics(registry, {
    counterName: 'reqs_total',
    counterHelp: 'Requests.',
    histogramName: 'req_seconds',
    histogramHelp: 'Latency.',
    buckets: BUCKETS,
  });
}

describe('RequestMetrics', () => {
  it('prints exactly what prom-client Counter and Histogram print for the same requests', async () => {
    const registry = new Registry();
    const metrics = requestMetrics(registry);
    const series = new Map<string, ReturnType<RequestMetrics['series']>>();
    for (const [labels, seconds] of OBSERVATIONS) {
      const key = JSON.stringify(labels);
      if (!series.has(key)) series.set(key, metrics.series(labels));
      series.get(key)!.observe(seconds);
    }
    expect(await registry.metrics()).toBe(await promClientText());
  });

  it('gives the JSON form with the labels merged, and resets to zero', async () => {
    const registry = new Registry();
    requestMetrics(registry).series({ method: 'GET', route: '/:code', status_code: '302' }).observe(0.02);
    const [counter, histogram] = await registry.getMetricsAsJSON();
    expect(counter).toMatchObject({ name: 'reqs_total', type: 'counter', values: [{ value: 1 }] });
    const count = histogram!.values.find((v) => (v as { metricName?: string }).metricName === 'req_seconds_count');
    expect(count).toMatchObject({ value: 1, labels: { method: 'GET', route: '/:code', status_code: '302' } });
    registry.resetMetrics();
    expect(await registry.metrics()).toContain('reqs_total{method="GET",route="/:code",status_code="302"} 0');
  });
});
