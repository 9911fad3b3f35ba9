import { collectDefaultMetrics, Registry } from 'prom-client';

/**
 * The process's Prometheus registry. Each concern registers its own metrics on it
 * (`new Counter({ ..., registers: [metrics.registry] })`); `GET /metrics` exposes it.
 */
export interface Metrics {
  readonly registry: Registry;
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return { registry };
}
