import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { missRatio, readCacheLookups } from '../../bench/lib/cache-lookups.js';

describe('bench: redirect-cache miss ratio', () => {
  let server: Server;
  let baseUrl: string;
  let body = '';
  beforeAll(async () => {
    server = createServer((_req, res) => res.end(body));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    baseUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('reads the counts from the service metrics, and nothing from a target without them', async () => {
    body =
      '# TYPE redirect_cache_lookups_total counter\nredirect_cache_lookups_total{result="hit"} 12\nredirect_cache_lookups_total{result="miss"} 3\n';
    expect(await readCacheLookups(baseUrl)).toEqual({ hits: 12, misses: 3 });
    body = 'Not a metrics page';
    expect(await readCacheLookups(baseUrl)).toBeUndefined();
  });

  it('is the share of misses between two readings', () => {
    expect(missRatio({ hits: 10, misses: 5 }, { hits: 12, misses: 13 })).toBeCloseTo(0.8);
    expect(missRatio({ hits: 1, misses: 1 }, { hits: 1, misses: 1 })).toBeUndefined();
    expect(missRatio(undefined, { hits: 1, misses: 1 })).toBeUndefined();
  });
});
