/** The two benchmarked request mixes, and one measured autocannon run of a target. */
import autocannon from 'autocannon';
import { freshMapping, type Mapping, popularMappings } from './codes.js';
import { SAMPLE_SEED, USER_AGENT } from './settings.js';
import { quantile } from './stats.js';

export type WorkloadName = 'redirect' | 'shorten';

/** What a target holds: `mappings` seeded rows, of which `popular` are the redirect workload's codes. */
export interface Stored {
  readonly mappings: number;
  readonly popular: number;
}

export interface Workload {
  readonly name: WorkloadName;
  readonly expectedStatus: number;
  /** One line saying what the requests are, for the printed output. */
  describe(stored: Stored): string;
  /** The request sequence of one run. */
  requests(stored: Stored): autocannon.Request[];
  /** Sends one request like the workload's and returns what is wrong with the answer. */
  probe(baseUrl: string, stored: Stored): Promise<string[]>;
}

export interface Measurement {
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly requests: number;
  /** Responses with another status than expected, plus connection errors. */
  readonly unexpected: number;
  readonly statuses: Readonly<Record<string, number>>;
  readonly errors: number;
  readonly timeouts: number;
}

const CACHE_CONTROL = 'private, max-age=0';
const headers = { 'user-agent': USER_AGENT };
const fmt = (n: number) => n.toLocaleString('en-US');

const samples = new Map<string, Mapping[]>();
function popular({ mappings, popular }: Stored): Mapping[] {
  const key = `${mappings}/${popular}`;
  let sample = samples.get(key);
  if (sample === undefined) samples.set(key, (sample = popularMappings(mappings, popular, SAMPLE_SEED)));
  return sample;
}

function expectStatus(response: Response, expected: number): string[] {
  return response.status === expected ? [] : [`status ${response.status}, expected ${expected}`];
}

export const redirect: Workload = {
  name: 'redirect',
  expectedStatus: 302,
  describe: ({ mappings, popular }) =>
    popular >= mappings
      ? `GET /{code}; popular links: requests cycle over all ${fmt(mappings)} stored codes, shuffled`
      : `GET /{code}; popular links: requests cycle over ${fmt(popular)} codes drawn uniformly (seed ${SAMPLE_SEED}) from the ${fmt(mappings)} stored`,
  requests(stored) {
    const paths = popular(stored).map((m) => `/${m.code}`);
    let next = 0;
    return [{ method: 'GET', setupRequest: (request) => ({ ...request, path: paths[next++ % paths.length] }) }];
  },
  async probe(baseUrl, stored) {
    const expected = popular(stored)[0]!;
    const response = await fetch(`${baseUrl}/${expected.code}`, { headers, redirect: 'manual' });
    await response.body?.cancel();
    const location = response.headers.get('location');
    const cacheControl = response.headers.get('cache-control');
    return [
      ...expectStatus(response, redirect.expectedStatus),
      ...(location === expected.url ? [] : [`Location ${location}`]),
      ...(cacheControl === CACHE_CONTROL ? [] : [`Cache-Control ${cacheControl}`]),
    ];
  },
};

export const shorten: Workload = {
  name: 'shorten',
  expectedStatus: 201,
  describe: () => 'POST /shorten; every request a valid body with a fresh unique code',
  requests: () => [
    {
      method: 'POST',
      path: '/shorten',
      headers: { ...headers, 'content-type': 'application/json' },
      setupRequest: (request) => ({ ...request, body: JSON.stringify(freshMapping()) }),
    },
  ],
  async probe(baseUrl) {
    const sent = freshMapping();
    const response = await fetch(`${baseUrl}/shorten`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify(sent),
    });
    const body = (await response.json().catch(() => undefined)) as Record<string, unknown> | undefined;
    const created = body?.code === sent.code && typeof body.id === 'number';
    return [...expectStatus(response, shorten.expectedStatus), ...(created ? [] : [`body ${JSON.stringify(body)}`])];
  },
};

export const WORKLOADS: readonly Workload[] = [redirect, shorten];

/** Responses per status code: autocannon reports them, its type declarations do not. */
function statusCounts(result: autocannon.Result): Record<string, number> {
  const stats = (result as { statusCodeStats?: Record<string, { count: number }> }).statusCodeStats ?? {};
  return Object.fromEntries(Object.entries(stats).map(([status, { count }]) => [status, count]));
}

function toMeasurement(result: autocannon.Result, latenciesMs: number[], expectedStatus: number): Measurement {
  const statuses = statusCounts(result);
  const unexpected = Object.entries(statuses)
    .filter(([status]) => Number(status) !== expectedStatus)
    .reduce((sum, [, count]) => sum + count, result.errors);
  const sorted = latenciesMs.sort((a, b) => a - b);
  return {
    rps: result.requests.average,
    p50Ms: quantile(sorted, 0.5),
    p99Ms: quantile(sorted, 0.99),
    requests: result.requests.total,
    unexpected,
    statuses,
    errors: result.errors,
    timeouts: result.timeouts,
  };
}

/**
 * Runs autocannon, also keeping every response time: its own histogram truncates them to
 * whole milliseconds, too coarse for sub-millisecond medians.
 */
function run(options: autocannon.Options): Promise<{ result: autocannon.Result; latenciesMs: number[] }> {
  return new Promise((resolve, reject) => {
    const latenciesMs: number[] = [];
    const instance = autocannon(options, (error: unknown, result) =>
      error ? reject(error instanceof Error ? error : new Error(String(error))) : resolve({ result, latenciesMs }),
    );
    instance.on('response', (_client, _status, _bytes, responseTimeMs) => latenciesMs.push(responseTimeMs));
  });
}

/** One autocannon run of `workload` against `baseUrl`, from this process. */
export async function measure(
  workload: Workload,
  baseUrl: string,
  stored: Stored,
  options: { readonly durationS: number; readonly connections: number },
): Promise<Measurement> {
  const { result, latenciesMs } = await run({
    url: baseUrl,
    connections: options.connections,
    duration: options.durationS,
    headers,
    requests: workload.requests(stored),
  });
  return toMeasurement(result, latenciesMs, workload.expectedStatus);
}
