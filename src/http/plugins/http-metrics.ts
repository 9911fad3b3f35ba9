import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { Counter, Histogram } from 'prom-client';
import type { Metrics } from '../../adapters/telemetry/metrics.js';
import { addRouteHook } from './route-hooks.js';

type Labels = { method: string; route: string; status_code: string };
/** One label set's children of the two metrics. */
interface Observed {
  readonly requests: { inc(): void };
  readonly duration: { observe(seconds: number): void };
}

/** The `route` label of requests that matched no route. */
export const NOT_FOUND_ROUTE = 'not_found';

/**
 * `http_requests_total` and `http_request_duration_seconds`, by method, route pattern (never the
 * raw URL, so the label set stays bounded) and status code. One `onResponse` hook per route,
 * with the route in its closure and the label objects reused. Register before any route.
 */
export function registerHttpMetrics(app: FastifyInstance, metrics: Metrics): void {
  const labelNames = ['method', 'route', 'status_code'] as const;
  const requests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered, by method, route and status code.',
    labelNames,
    registers: [metrics.registry],
  });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from receiving an HTTP request to sending the last byte of its answer, by method, route and status code.',
    labelNames,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [metrics.registry],
  });

  const observer = (route: string) => {
    // method → status → the counters' children for those labels, so a request neither allocates
    // nor hashes a label set here.
    const known = new Map<string, Map<number, Observed>>();
    return (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
      const { method } = request;
      const status = reply.statusCode;
      let byStatus = known.get(method);
      if (byStatus === undefined) known.set(method, (byStatus = new Map()));
      let observed = byStatus.get(status);
      if (observed === undefined) {
        const labels: Labels = { method, route, status_code: String(status) };
        observed = { requests: requests.labels(labels), duration: duration.labels(labels) };
        byStatus.set(status, observed);
      }
      observed.requests.inc();
      observed.duration.observe(reply.elapsedTime / 1000);
      done();
    };
  };

  app.addHook('onRoute', (route) => addRouteHook(route, 'onResponse', observer(route.url)));
  // Unmatched requests run only the app's own hooks; matched ones are counted by their route's.
  const notFound = observer(NOT_FOUND_ROUTE);
  app.addHook('onResponse', (request, reply, done) => (request.is404 ? notFound(request, reply, done) : done()));
}
