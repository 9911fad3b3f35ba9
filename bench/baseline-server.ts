/**
 * The baseline: a bare `node:http` server doing the service's two benchmarked jobs with a `Map`
 * and nothing else, to put the service's numbers in proportion on a noisy machine.
 *
 *   PORT=8001 HOST=127.0.0.1 node --import tsx bench/baseline-server.ts --mappings 1000
 *
 * `--mappings N` preloads the same N mappings the bench loads into the service's database (code
 * to URL; 10,000,000 of them need `--max-old-space-size` above V8's default). `POST /shorten`
 * parses and checks the JSON body, refuses a taken code and answers 201 from memory. The process
 * exits when its standard input closes, so it cannot outlive the bench.
 *
 * Like the service (`src/server.ts`), it first keeps two of `process.nextTick`'s queue entries
 * alive (`retainTickShapes`): without that, a full collection while it idles (V8's memory reducer,
 * between the bench's runs) can leave `nextTick`'s literal megamorphic for the rest of the
 * process's life, and the baseline then answers 25–30 % slower, user time up 2.6 µs a request
 * (bench/PROFILE.md, "A baseline process that ran 30 % slow"): a yardstick that shrinks at random.
 *
 * `BASELINE_RATE_LIMIT_HEADERS=true` (never in the bench's baseline; bench/ab.ts, as a variant):
 * each redirect also takes a token from its client's bucket and carries the two rate-limit
 * headers the design asks of every answer on a limited route, the strings the service writes
 * under the bench's limits. What the baseline then loses is the least any service on node:http
 * that follows the design pays for them (bench/PROFILE.md).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { parseArgs } from 'node:util';
import { retainTickShapes } from '../src/support/tick-shapes.js';
import { type Mapping, seedMapping } from './lib/codes.js';

const CACHE_CONTROL = 'private, max-age=0';
const JSON_TYPE = 'application/json; charset=utf-8';

/** Code to URL: every redirect is one lookup here. */
const urls = new Map<string, string>();
const rateLimitHeaders = process.env.BASELINE_RATE_LIMIT_HEADERS === 'true';
let lastId = 0;

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/**
 * The `redirects` policy the service runs with in the bench: the limit and window bench/ab.ts
 * gives every target it starts (SERVICE_ENV of bench/lib/variants.ts), read only with
 * BASELINE_RATE_LIMIT_HEADERS.
 */
function redirectsPolicy(): { limit: number; windowS: number } {
  const limit = Number(process.env.RATE_LIMIT_REDIRECTS_LIMIT);
  const windowS = Number(process.env.RATE_LIMIT_REDIRECTS_WINDOW_S);
  if (!(limit > 0) || !(windowS > 0))
    throw new Error('BASELINE_RATE_LIMIT_HEADERS needs RATE_LIMIT_REDIRECTS_LIMIT and RATE_LIMIT_REDIRECTS_WINDOW_S');
  return { limit, windowS };
}
const POLICY = rateLimitHeaders ? redirectsPolicy() : { limit: 0, windowS: 0 };
const POLICY_HEADER = `"redirects";q=${POLICY.limit};w=${POLICY.windowS}`;
const buckets = new Map<string, { tokens: number; at: number }>();

/** A token from the client's bucket (refilled at the limit a window): the `RateLimit` header of what is left. */
function rateLimitHeader(client: string): string {
  const { limit, windowS } = POLICY;
  const now = performance.now();
  let bucket = buckets.get(client);
  if (bucket === undefined) buckets.set(client, (bucket = { tokens: limit, at: now }));
  bucket.tokens = Math.min(limit, bucket.tokens + ((now - bucket.at) * limit) / (windowS * 1000)) - 1;
  bucket.at = now;
  return `"redirects";r=${Math.floor(bucket.tokens)};t=${windowS}`;
}

function redirect(req: IncomingMessage, res: ServerResponse, code: string): void {
  const url = urls.get(code);
  if (url === undefined) return sendJson(res, 404, { detail: 'Not found' });
  if (rateLimitHeaders) {
    res.writeHead(302, {
      'ratelimit-policy': POLICY_HEADER,
      ratelimit: rateLimitHeader(req.socket.remoteAddress ?? ''),
      location: url,
      'cache-control': CACHE_CONTROL,
      'content-length': 0,
    });
  } else {
    res.writeHead(302, { location: url, 'cache-control': CACHE_CONTROL, 'content-length': 0 });
  }
  res.end();
}

function asMapping(body: unknown): Mapping | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const { code, url, created_at, click_count } = body as Record<string, unknown>;
  const valid =
    typeof code === 'string' &&
    /^[a-zA-Z0-9]{6,10}$/.test(code) &&
    typeof url === 'string' &&
    url.length > 0 &&
    typeof created_at === 'string' &&
    Number.isInteger(click_count) &&
    (click_count as number) >= 0;
  return valid ? { code, url, created_at, click_count: click_count as number } : undefined;
}

function shorten(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    let mapping: Mapping | undefined;
    try {
      mapping = asMapping(JSON.parse(Buffer.concat(chunks).toString('utf8')));
    } catch {
      mapping = undefined;
    }
    if (mapping === undefined) return sendJson(res, 422, { detail: 'Invalid body' });
    if (urls.has(mapping.code)) return sendJson(res, 409, { detail: 'The code is taken' });
    urls.set(mapping.code, mapping.url);
    sendJson(res, 201, { id: ++lastId, ...mapping });
  });
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const path = req.url ?? '/';
  if (req.method === 'POST' && path === '/shorten') return shorten(req, res);
  if (req.method === 'GET' && path === '/health') return sendJson(res, 200, { status: 'ok' });
  if (req.method === 'GET') return redirect(req, res, path.slice(1));
  sendJson(res, 405, { detail: 'Method not allowed' });
}

function main(): void {
  retainTickShapes();
  const { values } = parseArgs({ options: { mappings: { type: 'string', default: '0' } } });
  const count = Number(values.mappings);
  if (!Number.isSafeInteger(count) || count < 0) throw new Error(`--mappings must be a count, got ${values.mappings}`);
  for (let i = 0; i < count; i++) {
    const { code, url } = seedMapping(i);
    urls.set(code, url);
  }
  lastId = count;

  const server = createServer(handle);
  const stop = () => server.close(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.stdin.on('end', () => process.exit(0)).resume();
  server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1');
}

main();
