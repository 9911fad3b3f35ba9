/**
 * A redis-server of the test's own (never the shared one on 6379), on a free port, keeping
 * nothing on disk (`--save "" --appendonly no`, like the CI's shared one): stopping it loses every
 * key, which is what a restart of such a Redis does. Paused (SIGSTOP), it is a Redis stuck in a
 * long command or behind a network partition.
 */
import net from 'node:net';
import { tmpdir } from 'node:os';
import { binaryAvailable, freePort, OwnServer } from './own-server.js';

export const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? '/usr/bin/redis-server';

/** Whether the binary is there; in CI its absence fails, elsewhere the tests skip with a reason. */
export const redisServerBinaryAvailable = () => binaryAvailable('redis-server', REDIS_SERVER_BIN);

function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')));
    socket.once('error', () => done(false));
  });
}

export class OwnRedisServer extends OwnServer {
  private constructor(port: number) {
    super('redis-server', port);
  }

  static async create(): Promise<OwnRedisServer> {
    return new OwnRedisServer(await freePort());
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  protected command() {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    // It writes nothing there; the working directory stays untouched all the same.
    return [REDIS_SERVER_BIN, [...args, '--dir', tmpdir()]] as const;
  }

  protected ready(): Promise<boolean> {
    return answersPing(this.port);
  }

  /** Kills it: nothing of it is worth a clean shutdown. */
  destroy(): Promise<void> {
    return this.stop('SIGKILL');
  }
}
