/**
 * A redis-server of the test's own (never the shared one on 6379), on a free port, keeping
 * nothing on disk: the test may stop it (it comes back empty), pause it (SIGSTOP) and resume it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { freePort } from '../events/own-nats-server.js';
import { inCi } from './services.js';

export const REDIS_SERVER_BIN = process.env.REDIS_SERVER_BIN ?? '/usr/bin/redis-server';

/** Whether the binary is there; in CI its absence fails, elsewhere the tests skip with a reason. */
export function redisServerBinaryAvailable(): boolean {
  if (existsSync(REDIS_SERVER_BIN)) return true;
  const message = `redis-server binary not found at ${REDIS_SERVER_BIN}`;
  if (inCi) throw new Error(`${message}; CI requires it`);
  console.warn(`skipping own-redis-server tests: ${message}`);
  return false;
}

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

export class OwnRedisServer {
  private child: ChildProcess | undefined;
  private log = '';

  private constructor(readonly port: number) {}

  static async create(): Promise<OwnRedisServer> {
    return new OwnRedisServer(await freePort());
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  output(): string {
    return this.log;
  }

  /** Starts it (same port as before, empty) and waits until it answers PING. */
  async start(): Promise<void> {
    if (this.child) return;
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    const child = spawn(REDIS_SERVER_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    child.stdout?.on('data', (c: Buffer) => (this.log += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (this.log += c.toString()));
    const deadline = Date.now() + 10_000;
    while (!(await answersPing(this.port))) {
      if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}:\n${this.log}`);
      if (Date.now() > deadline) throw new Error(`redis-server did not start:\n${this.log}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  /** Stops it and waits until the process has gone; what it held is lost. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.child = undefined;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGCONT'); // a paused server would not act on SIGTERM
    child.kill('SIGTERM');
    await exited;
  }

  /** Freezes it: connections stay open, nothing is answered. */
  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  resume(): void {
    this.child?.kill('SIGCONT');
  }
}
