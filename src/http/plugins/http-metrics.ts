import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { Metrics } from '../../adapters/telemetry/metrics.js';
import { RequestMetrics, type RequestSeries } from '../../adapters/telemetry/request-metrics.js';
import { addRouteHook } from './route-hooks.js';

/** The `route` label of requests that matched no route. */
export const NOT_FOUND_ROUTE = 'not_found';

/** The series of one route by method and status code, made on first use and kept. */
export type RouteSeries = (method: string, status: number) => RequestSeries;

/**
 * `http_requests_total` and `http_request_duration_seconds`, by method, route pattern (never the
 * raw URL, so the label set stays bounded) and status code. One `onResponse` hook per route,
 * with the route in its closure and each label set's series kept, so a request neither
 * allocates nor hashes a label set here. Register before any route.
 *
 * Returns the series of a route pattern, for requests answered outside Fastify's lifecycle (the
 * redirect fast path): they count in the same series as the route's own.
 */
export function registerHttpMetrics(app: FastifyInstance, metrics: Metrics): (route: string) => RouteSeries {
  const requests = new RequestMetrics(metrics.registry, {
    counterName: 'http_requests_total',
    counterHelp: 'HTTP requests answered, by method, route and status code.',
    histogramName: 'http_request_duration_seconds',
    histogramHelp:
      'Time from receiving an HTTP request to sending the last byte of its answer, by method, route and status code.',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  });
  const routes = new Map<string, RouteSeries>();
  const seriesOf = (route: string): RouteSeries => {
    let known = routes.get(route);
    if (known === undefined) routes.set(route, (known = routeSeries(requests, route)));
    return known;
  };

  const observer = (route: string) => {
    const series = seriesOf(route);
    return (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
      series(request.method, reply.statusCode).observe(reply.elapsedTime / 1000);
      done();
    };
  };

  app.addHook('onRoute', (route) => addRouteHook(route, 'onResponse', observer(route.url)));
  // Unmatched requests run only the app's own hooks; matched ones are counted by their route's.
  const notFound = observer(NOT_FOUND_ROUTE);
  app.addHook('onResponse', (request, reply, done) => (request.is404 ? notFound(request, reply, done) : done()));
  return seriesOf;
}

function routeSeries(requests: RequestMetrics, route: string): RouteSeries {
  // method → status → the series of those labels.
  const known = new Map<string, Map<number, RequestSeries>>();
  return (method, status) => {
    let byStatus = known.get(method);
    if (byStatus === undefined) known.set(method, (byStatus = new Map()));
    let series = byStatus.get(status);
    if (series === undefined) {
      series = requests.series({ method, route, status_code: String(status) });
      byStatus.set(status, series);
    }
    return series;
  };
}
