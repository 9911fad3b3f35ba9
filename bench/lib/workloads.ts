/**
 * The benchmarked request mixes: each a wrk script of bench/wrk/ with its arguments, the status
 * every answer must have, and a probe that checks one answer in full before any load.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freshMapping, type Mapping, popularMappings, seedMapping } from './codes.js';
import { SAMPLE_SEED, USER_AGENT } from './settings.js';

export type WorkloadName = 'popular' | 'uniform' | 'shorten';
export type WorkloadKind = 'redirect' | 'shorten';

/** What a group of targets holds, and where the popular mix's paths are written. */
export interface Stored {
  readonly mappings: number;
  readonly popular: number;
  readonly dir: string;
}

/** One wrk run of a workload against one target. */
export interface RunContext {
  /** 0 for the warm-up, then 1.. for the rounds. */
  readonly round: number;
  /** For `shorten`: see `shortenTag`. */
  readonly tag: string;
}

export interface Workload {
  readonly name: WorkloadName;
  readonly kind: WorkloadKind;
  readonly expectedStatus: number;
  readonly script: string;
  args(stored: Stored, run: RunContext): string[];
  /** One line saying what the requests are, for the printed output. */
  describe(stored: Stored): string;
  /** Sends one request like the workload's and returns what is wrong with the answer. */
  probe(baseUrl: string, stored: Stored): Promise<string[]>;
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

/** The popular mix's paths, one per line, written once per table size. */
function popularFile(stored: Stored): string {
  const file = join(stored.dir, `popular-${stored.mappings}-${stored.popular}.txt`);
  // Not rewritten while a wrk may be reading it (bench/ab.ts AB_TOGETHER runs several at once).
  if (existsSync(file)) return file;
  writeFileSync(
    file,
    `${popular(stored)
      .map((m) => `/${m.code}`)
      .join('\n')}\n`,
  );
  return file;
}

function expectStatus(response: Response, expected: number): string[] {
  return response.status === expected ? [] : [`status ${response.status}, expected ${expected}`];
}

async function probeRedirect(baseUrl: string, expected: Mapping): Promise<string[]> {
  const response = await fetch(`${baseUrl}/${expected.code}`, { headers, redirect: 'manual' });
  await response.body?.cancel();
  const location = response.headers.get('location');
  const cacheControl = response.headers.get('cache-control');
  return [
    ...expectStatus(response, 302),
    ...(location === expected.url ? [] : [`Location ${location}`]),
    ...(cacheControl === CACHE_CONTROL ? [] : [`Cache-Control ${cacheControl}`]),
  ];
}

export const popularMix: Workload = {
  name: 'popular',
  kind: 'redirect',
  expectedStatus: 302,
  script: 'popular.lua',
  args: (stored) => [popularFile(stored)],
  describe: ({ mappings, popular }) =>
    popular >= mappings
      ? `GET /{code}, popular codes: requests cycle over all ${fmt(mappings)} stored codes, shuffled`
      : `GET /{code}, popular codes: requests cycle over ${fmt(popular)} codes drawn uniformly (seed ${SAMPLE_SEED}) from the ${fmt(mappings)} stored`,
  probe: (baseUrl, stored) => probeRedirect(baseUrl, popular(stored)[0]!),
};

export const uniformMix: Workload = {
  name: 'uniform',
  kind: 'redirect',
  expectedStatus: 302,
  script: 'uniform.lua',
  // The same draws for every target in a round, other draws in each round.
  args: (stored, run) => [String(stored.mappings), String(SAMPLE_SEED + run.round)],
  describe: ({ mappings }) =>
    `GET /{code}, uniform: every request a code drawn uniformly from all ${fmt(mappings)} stored (fixed seed per round)`,
  probe: (baseUrl, stored) => probeRedirect(baseUrl, seedMapping(stored.mappings - 1)),
};

export const shortenMix: Workload = {
  name: 'shorten',
  kind: 'shorten',
  expectedStatus: 201,
  script: 'shorten.lua',
  args: (_stored, run) => [run.tag],
  describe: () => 'POST /shorten: every request a valid body with a code no target has seen',
  async probe(baseUrl) {
    const sent = freshMapping();
    const response = await fetch(`${baseUrl}/shorten`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify(sent),
    });
    const body = (await response.json().catch(() => undefined)) as Record<string, unknown> | undefined;
    const created = body?.code === sent.code && typeof body.id === 'number';
    return [...expectStatus(response, 201), ...(created ? [] : [`body ${JSON.stringify(body)}`])];
  },
};

export const WORKLOADS: readonly Workload[] = [popularMix, uniformMix, shortenMix];

/** Checks a uniform run's first draws against seedMapping: the Lua code generator must agree. */
export function sampleProblems(sample: readonly string[]): string[] {
  return sample.flatMap((entry) => {
    const [index, code] = entry.split('/');
    const expected = seedMapping(Number(index)).code;
    return expected === code ? [] : [`wrk drew ${code} for row ${index}, expected ${expected}`];
  });
}
