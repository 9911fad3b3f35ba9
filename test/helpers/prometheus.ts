import { Registry } from 'prom-client';

/** The value of `name` with exactly these labels in `registry`; undefined when it has no such series. */
export async function seriesValue(
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
): Promise<number | undefined> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return undefined;
  const { values } = await metric.get();
  const wanted = Object.entries(labels);
  const series = values.find(
    (v) =>
      Object.keys(v.labels).length === wanted.length &&
      wanted.every(([key, value]) => (v.labels as Record<string, unknown>)[key] === value),
  );
  return series?.value;
}

/** A metrics adapter, and how a test reads what it counted (a series by name and labels). */
export interface Counted<M> {
  readonly metrics: M;
  read(name: string, labels?: Record<string, string>): Promise<number | undefined>;
}

/** The adapter `create` makes on a registry of its own, for a contract suite. */
export function onFreshRegistry<M>(create: (registry: Registry) => M): Counted<M> {
  const registry = new Registry();
  return { metrics: create(registry), read: (name, labels) => seriesValue(registry, name, labels) };
}
