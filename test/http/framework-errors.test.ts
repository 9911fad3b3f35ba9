/**
 * Every error is `{detail}` (design "Errors"), also those that Fastify's router and Node's HTTP
 * parser answer before any route runs (issue 16): a path that is not valid percent-encoded UTF-8,
 * a path parameter over the length limit, malformed chunked bodies, a bad `Content-Length`, bytes
 * that are not HTTP, headers too large; and the usual body errors.
 */
import net from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestApp, useTestApps } from '../helpers/app.js';
import { sqlite } from '../helpers/backends.js';
import { HTTP_TEST_ENV } from '../helpers/http.js';

/** The answer is `status` with exactly `{detail}` as JSON, and `nosniff`. */
function expectDetailOnly(response: LightMyRequestResponse, status: number, detail: RegExp) {
  expect(response.statusCode, response.body).toBe(status);
  expect(String(response.headers['content-type'])).toMatch(/^application\/json/);
  expect(response.headers['x-content-type-options']).toBe('nosniff');
  const body = response.json<Record<string, unknown>>();
  expect(Object.keys(body)).toEqual(['detail']);
  expect(body.detail).toMatch(detail);
}

/** Sends raw bytes and reads what comes back until the server closes (or 3 s pass). */
function rawExchange(port: number, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    let received = '';
    const socket = net.connect({ host: '127.0.0.1', port }, () => socket.write(bytes));
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(received));
    setTimeout(() => socket.destroy(), 3000).unref();
  });
}

describe('framework errors are {detail}', () => {
  const t = useTestApp(sqlite, HTTP_TEST_ENV);
  let port: number;

  beforeAll(async () => {
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    port = (t.app.server.address() as net.AddressInfo).port;
  });

  it.each([
    ['/app/..%c0%af../x', 'an overlong UTF-8 encoding of /'],
    ['/%', 'a lone percent sign'],
    ['/docs/%c0', 'a truncated sequence, under a prefix route'],
    ['/abcdefgh%ff', 'an invalid byte where a code goes'],
  ])('%s (%s): 400, not FST_ERR_BAD_URL', async (url) => {
    const response = await t.app.inject({ method: 'GET', url });
    expectDetailOnly(response, 400, /^Malformed URL/);
    expect(response.body).not.toContain('FST_');
  });

  it('a 5,000-character path: 414 {detail}', async () => {
    expectDetailOnly(await t.app.inject({ method: 'GET', url: `/${'a'.repeat(5000)}` }), 414, /too long/);
  });

  it.each([
    ['text/html', 415],
    [';;;', 415],
    ['application/xml', 415],
  ])('Content-Type %s: %i {detail}', async (type, status) => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/shorten',
      headers: { 'content-type': type },
      payload: '<x/>',
    });
    expectDetailOnly(response, status, /media type/i);
  });

  it('a body over the limit: 413 {detail}; malformed JSON: 422 {detail}', async () => {
    const big = await t.app.inject({
      method: 'POST',
      url: '/shorten',
      headers: { 'content-type': 'application/json' },
      payload: `"${'a'.repeat(1024 * 1024 + 10)}"`,
    });
    expectDetailOnly(big, 413, /larger than/);
    const malformed = await t.app.inject({
      method: 'POST',
      url: '/shorten',
      headers: { 'content-type': 'application/json' },
      payload: '{"code": ',
    });
    expectDetailOnly(malformed, 422, /malformed JSON/);
  });

  const post = (headers: string, body: string) =>
    `POST /shorten HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${headers}\r\n${body}`;
  it.each([
    ['a chunk size that is not hex', post('Transfer-Encoding: chunked\r\n', 'zz\r\nabc\r\n0\r\n\r\n'), 400],
    ['a chunk longer than its size', post('Transfer-Encoding: chunked\r\n', '5\r\nabcdefgh\r\n0\r\n\r\n'), 400],
    ['Content-Length with chunked', post('Content-Length: 10\r\nTransfer-Encoding: chunked\r\n', '0\r\n\r\n'), 400],
    ['a Content-Length that is not a number', post('Content-Length: abc\r\n', '{}'), 400],
    ['a bad chunk after a good one', post('Transfer-Encoding: chunked\r\n', '2\r\n{"\r\nZZ\r\n'), 400],
    ['a chunk overrun after a good one', post('Transfer-Encoding: chunked\r\n', '2\r\n{"\r\n3\r\nabcdef\r\n'), 400],
    ['an unknown method', 'FOO / HTTP/1.1\r\nHost: x\r\n\r\n', 400],
    ['an unknown HTTP version', 'GET / HTTP/9.9\r\nHost: x\r\n\r\n', 400],
    ['a control character in a header', 'GET /health HTTP/1.1\r\nHost: x\r\nX: a\u0001b\r\n\r\n', 400],
    ['headers over 16 KiB', `GET /health HTTP/1.1\r\nHost: x\r\nX: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
  ])('%s: %i {detail} on the wire', async (_what, bytes, status) => {
    const answer = await rawExchange(port, bytes);
    const [head = '', body = ''] = answer.split('\r\n\r\n');
    expect(head).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
    expect(head).toMatch(/content-type: application\/json/i);
    expect(head).toMatch(/x-content-type-options: nosniff/i);
    expect(Object.keys(JSON.parse(body) as object)).toEqual(['detail']);
  });
});

describe('while the service shuts down', () => {
  const apps = useTestApps('each');

  it('a request that arrives on an open connection is served, not answered with Fastify’s own 503 shape', async () => {
    const t = await apps(sqlite, HTTP_TEST_ENV);
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const port = (t.app.server.address() as net.AddressInfo).port;
    const body = JSON.stringify({
      code: 'closing01',
      url: 'https://example.com/',
      created_at: '2024-01-01T00:00:00Z',
      click_count: 0,
    });
    let received = '';
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    // A request in flight (its body not yet sent) keeps the connection busy while the service closes.
    socket.write(
      `POST /shorten HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    const closing = t.app.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.write(`${body}GET /health HTTP/1.1\r\nHost: x\r\n\r\n`);
    await closed;
    await closing;
    expect(received).not.toContain('Service Unavailable');
    expect(received).toMatch(/^HTTP\/1\.1 201 /);
    const answers = received.split(/(?=HTTP\/1\.1 \d{3} )/);
    expect(answers.map((a) => a.slice(0, 12))).toEqual(['HTTP/1.1 201', 'HTTP/1.1 200']);
    expect(answers[1]).toMatch(/connection: close/i);
  });
});
