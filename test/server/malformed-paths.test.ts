/**
 * Odd request targets on a real socket to the built service, as a client that is not a browser
 * sends them: the redirect's fast path (on the server's request event, which
 * test/http/malformed-input.test.ts cannot reach through `inject`) and Node's HTTP parser see them
 * first. Raw and percent-encoded NUL, a lone `%`, overlong and cut UTF-8, dot segments, control
 * characters, huge codes and queries, on GET and HEAD of a stored code and of odd ones, and on the
 * API's paths. Never a 5xx; every error answer JSON with a `{detail}` (none for HEAD, which has no
 * body), and the stored link still redirects afterwards.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchShorten } from '../helpers/http.js';
import { answerFault } from '../helpers/http-client.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';

/** What a raw request got: the status and headers of the first answer, and its body. */
interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** Sends `head` (a request line and headers, bytes as given) on a new connection, reads to its close. */
function raw(port: number, head: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      const [statusLine = '', ...lines] = text.slice(0, end < 0 ? text.length : end).split('\r\n');
      const headers = Object.fromEntries(
        lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
      );
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0);
      resolve({ status, headers, body: end < 0 ? '' : text.slice(end + 4) });
    });
    socket.write(Buffer.from(`${head}Host: 127.0.0.1\r\nConnection: close\r\n\r\n`, 'latin1'));
  });
}

/** The stored link: the targets that start `/abcdef` are odd forms of it. */
const CODE = 'abcdef';

const TARGETS: readonly string[] = [
  '/%00',
  '/ab%00cd',
  '/%',
  '/abcdef%',
  '/%zz',
  '/%C0%AF',
  '/%E2%82',
  '/%ff%fe',
  '/..%2f..%2fetc%2fpasswd',
  '/%2e%2e',
  '/./abcdef',
  '//abcdef',
  '/abcdef/',
  '/abcdef;x',
  '/abcdef?%00',
  '/abcdef?q=%zz&&=&',
  '/abcdef#frag',
  '/ab\x01cd',
  '/ab\x7fcd',
  '/ab\tcd',
  '/\xe9t\xe9',
  `/${'a'.repeat(5000)}`,
  `/abcdef?${'q='.repeat(3000)}`,
  '/api/v1/links/%00/stats',
  '/api/v1/admin/users/99999999999999999999',
  '/api/v1/links/export?format=%00',
  '/urls?limit=%00&after=1e999',
  '*',
  'http://127.0.0.1/abcdef',
];

describe('odd request targets on a socket to the built service', () => {
  let server: ServerProcess;
  let port: number;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'urlshortener-malformed-paths-'));
    server = await startServer({ DATABASE_URL: `sqlite:${join(dir, 'db.sqlite')}`, RATE_LIMIT_ENABLED: 'false' });
    port = Number(new URL(server.url).port);
    const created = await fetchShorten(server.url, { code: CODE, url: 'https://example.com/odd' });
    expect(created.status, await created.text()).toBe(201);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('never a 5xx; every error a JSON {detail}; the link still redirects', async () => {
    const faults: string[] = [];
    for (const target of TARGETS) {
      for (const method of ['GET', 'HEAD']) {
        const answer = await raw(port, `${method} ${target} HTTP/1.1\r\n`);
        const wrong = answerFault(
          { status: answer.status, contentType: answer.headers['content-type'], body: answer.body },
          { bodyless: method === 'HEAD' },
        );
        if (wrong) faults.push(`${method} ${JSON.stringify(target.slice(0, 60))} → ${wrong}`);
      }
    }
    expect(faults).toEqual([]);
    const after = await raw(port, `GET /${CODE} HTTP/1.1\r\n`);
    expect(after.status).toBe(302);
    expect(after.headers.location).toBe('https://example.com/odd');
    expect(server.output()).not.toMatch(/"level":50/);
  }, 60_000);
});
