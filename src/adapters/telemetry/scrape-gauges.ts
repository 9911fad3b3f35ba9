import { Gauge, type Registry } from 'prom-client';

/** A gauge whose value is read off a measurement taken at scrape time. */
export interface ScrapedGauge<F> {
  readonly name: string;
  readonly help: string;
  readonly value: (figures: F) => number;
}

/**
 * Gauges measured at each scrape by `measure`, once for all of them (they are collected in one
 * scrape: one measurement for all). When it fails (the database away), they keep their last values.
 *
 * @example
 *   scrapeGauges(registry, () => relay.backlog(), [
 *     { name: 'outbox_depth', help: '…', value: (figures) => figures.depth },
 *   ]);
 */
export function scrapeGauges<F>(registry: Registry, measure: () => Promise<F>, gauges: readonly ScrapedGauge<F>[]) {
  let latest: Promise<F | undefined> | undefined;
  const once = () => {
    latest ??= measure()
      .catch(() => undefined)
      .finally(() => setImmediate(() => (latest = undefined)));
    return latest;
  };
  for (const { name, help, value } of gauges) {
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        const figures = await once();
        if (figures !== undefined) this.set(value(figures));
      },
    });
  }
}
