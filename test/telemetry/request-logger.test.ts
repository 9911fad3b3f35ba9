import { Writable } from 'node:stream';
import Fastify, { LogController } from 'fastify';
import { describe, expect, it } from 'vitest';
import { lazyRequestLogger, logsAt } from '../../src/http/plugins/request-logger.js';

/** A Fastify app logging JSON lines at `level` into an array, with the lazy request logger. */
async function app(level: string) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  const server = Fastify({
    logger: { level, stream },
    childLoggerFactory: lazyRequestLogger,
    logController: new LogController({ disableRequestLogging: true }),
  });
  server.get('/quiet', async (request) => ({ debug: logsAt(request.log, 'debug') }));
  server.get('/loud', async (request) => {
    request.log.warn({ extra: 1 }, 'something to say');
    request.log.debug('not at this level');
    return { ok: true };
  });
  await server.ready();
  return { server, lines };
}

describe('the lazy request logger', () => {
  it('writes the lines of enabled levels with the request id, as a pino child would', async () => {
    const { server, lines } = await app('info');
    const response = await server.inject({ method: 'GET', url: '/loud', headers: { 'x-request-id': 'abc' } });
    expect(response.statusCode).toBe(200);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, msg: 'something to say', extra: 1, reqId: expect.any(String) });
    await server.close();
  });

  it('says which levels are enabled, and makes no line when nothing is logged', async () => {
    const { server, lines } = await app('info');
    expect((await server.inject({ method: 'GET', url: '/quiet' })).json()).toEqual({ debug: false });
    expect(lines).toHaveLength(0);
    await server.close();
    const verbose = await app('debug');
    expect((await verbose.server.inject({ method: 'GET', url: '/quiet' })).json()).toEqual({ debug: true });
    await verbose.server.close();
  });
});
