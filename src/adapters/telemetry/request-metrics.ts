import type { Metric, Registry } from 'prom-client';

/** The labels of one series: method, route pattern and status code. */
export type RequestLabels = Readonly<{ method: string; route: string; status_code: string }>;

/** One label set's count, latency sum and latency buckets. */
export class RequestSeries {
  count = 0;
  sum = 0;
  /** Observations per bucket (not cumulative); the last counts those above every bound. */
  readonly buckets: Float64Array;

  constructor(
    readonly labels: RequestLabels,
    private readonly bounds: readonly number[],
  ) {
    this.buckets = new Float64Array(bounds.length + 1);
  }

  observe(seconds: number): void {
    this.count++;
    this.sum += seconds;
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && seconds > bounds[i]!) i++;
    this.buckets[i]!++;
  }
}

interface Value {
  readonly labels: Readonly<Record<string, string | number>>;
  readonly sharedLabels?: RequestLabels;
  readonly value: number;
  readonly metricName?: string;
}

export interface RequestMetricsOptions {
  readonly counterName: string;
  readonly counterHelp: string;
  readonly histogramName: string;
  readonly histogramHelp: string;
  readonly buckets: readonly number[];
}

/**
 * A request counter and a latency histogram kept as plain numbers per label set, exposed through
 * the registry in prom-client's own format (`# TYPE ... counter` and `... histogram`, the same
 * lines its Counter and Histogram print). Counting a request is a few additions: prom-client's
 * metrics hash and validate the label set and allocate on every observation, which cost more
 * than the rest of a cached redirect's own work.
 */
export class RequestMetrics {
  private readonly all: RequestSeries[] = [];

  constructor(
    registry: Registry,
    private readonly options: RequestMetricsOptions,
  ) {
    const { counterName, counterHelp, histogramName, histogramHelp } = options;
    registry.registerMetric(this.metric(counterName, counterHelp, 'counter', () => this.counts()));
    registry.registerMetric(this.metric(histogramName, histogramHelp, 'histogram', (shared) => this.histogram(shared)));
  }

  /** A new series for these labels (the caller keeps it: one per label set). */
  series(labels: RequestLabels): RequestSeries {
    const series = new RequestSeries(Object.freeze({ ...labels }), this.options.buckets);
    this.all.push(series);
    return series;
  }

  private counts(): Value[] {
    return this.all.map((s) => ({ labels: s.labels, value: s.count }));
  }

  /** Per series: the cumulative buckets, `+Inf`, `_sum` and `_count`, as prom-client lists them. */
  private histogram(shared: boolean): Value[] {
    const name = this.options.histogramName;
    const { buckets: bounds } = this.options;
    return this.all.flatMap((s) => {
      const label = (extra: Record<string, string | number>) =>
        shared ? { labels: extra, sharedLabels: s.labels } : { labels: { ...s.labels, ...extra } };
      let cumulative = 0;
      const buckets = bounds.map((le, i) => {
        cumulative += s.buckets[i]!;
        return { ...label({ le }), value: cumulative, metricName: `${name}_bucket` };
      });
      return [
        ...buckets,
        { ...label({ le: '+Inf' }), value: s.count, metricName: `${name}_bucket` },
        { ...label({}), value: s.sum, metricName: `${name}_sum` },
        { ...label({}), value: s.count, metricName: `${name}_count` },
      ];
    });
  }

  /** A metric the registry can list: `getForPromString` for the text format, `get` for JSON. */
  private metric(name: string, help: string, type: 'counter' | 'histogram', values: (shared: boolean) => Value[]) {
    const data = (shared: boolean) => ({ name, help, type, aggregator: 'sum', values: values(shared) });
    const metric = {
      name,
      help,
      type,
      aggregator: 'sum',
      get: async () => data(false),
      getForPromString: async () => data(true),
      reset: () => {
        for (const s of this.all) {
          s.count = 0;
          s.sum = 0;
          s.buckets.fill(0);
        }
      },
    };
    // The registry only calls the members above; prom-client types metrics as its own classes.
    return metric as unknown as Metric;
  }
}
