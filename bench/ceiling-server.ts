/**
 * The generator-ceiling stand-in used when nginx is not installed: a node:net server that parses
 * nothing and answers every request line it sees with a canned response (302, or 201 to a POST,
 * or 200 to /health). It does far less per request than any node:http server, but it is still
 * one Node thread, so the ceiling it shows may be below wrk's own: with it, more figures may be
 * marked GENERATOR-BOUND, never fewer. Install nginx for the real ceiling.
 *
 *   PORT=8002 HOST=127.0.0.1 node --import tsx bench/ceiling-server.ts
 */
import { createServer } from 'node:net';

const reply = (status: string, headers: string, body = '') =>
  Buffer.from(`HTTP/1.1 ${status}\r\n${headers}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);

const REDIRECT = reply('302 Found', 'location: https://example.com/seeded/0000000?ref=bench\r\n');
const CREATED = reply('201 Created', 'content-type: application/json\r\n', '{"id":1}');
const HEALTH = reply('200 OK', 'content-type: application/json\r\n', '{"status":"ok"}');
const REQUEST_LINE = / HTTP\/1\.1\r\n/g;

const server = createServer((socket) => {
  socket.setNoDelay(true);
  socket.on('data', (chunk: Buffer) => {
    const text = chunk.toString('latin1');
    const requests = text.match(REQUEST_LINE)?.length ?? 0;
    if (requests === 0) return;
    const canned = text.startsWith('POST') ? CREATED : text.startsWith('GET /health ') ? HEALTH : REDIRECT;
    socket.write(requests === 1 ? canned : Buffer.concat(Array.from({ length: requests }, () => canned)));
  });
  socket.on('error', () => socket.destroy());
});
process.on('SIGTERM', () => process.exit(0));
process.stdin.on('end', () => process.exit(0)).resume();
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1');
