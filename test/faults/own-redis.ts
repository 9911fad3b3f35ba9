/**
 * A Redis server of the fault suite's own (never the shared one on 6379), keeping nothing on
 * disk (`--save "" --appendonly no`, like the CI's shared one): stopping it loses every key,
 * which is what a restart of such a Redis does. It may also be paused (`SIGSTOP`): connections
 * stay open and nothing answers, like a Redis stuck in a long command or a network partition.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../events/own-nats-server.js';
import { REDIS_SERVER_BIN } from './binaries.js';
import { forget, killOnExit } from './own-process.js';

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export class OwnRedis {
  private child: ChildProcess | undefined;
  private paused = false;
  private log = '';

  private constructor(
    readonly port: number,
    private readonly dir: string,
  ) {}

  static async create(): Promise<OwnRedis> {
    return new OwnRedis(await freePort(), mkdtempSync(join(tmpdir(), 'urlshortener-faults-redis-')));
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  output(): string {
    return this.log;
  }

  async start(): Promise<void> {
    if (this.child) return;
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    const child = spawn(REDIS_SERVER_BIN, [...args, '--dir', this.dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    if (child.pid) killOnExit(child.pid);
    child.stdout?.on('data', (c: Buffer) => (this.log += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (this.log += c.toString()));
    const deadline = Date.now() + 10_000;
    while (!/Ready to accept connections/.test(this.log) || !(await accepts(this.port))) {
      if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}:\n${this.log}`);
      if (Date.now() > deadline) throw new Error(`redis-server did not start:\n${this.log}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Stops it (its keys are gone) and waits until the process has exited. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.child = undefined;
    if (child.pid) forget(child.pid);
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    if (this.paused) child.kill('SIGCONT');
    this.paused = false;
    child.kill(signal);
    await exited;
  }

  /** Freezes the process: connections stay open, nothing is answered. */
  pause(): void {
    if (!this.child || this.paused) return;
    this.child.kill('SIGSTOP');
    this.paused = true;
  }

  resume(): void {
    if (!this.child || !this.paused) return;
    this.child.kill('SIGCONT');
    this.paused = false;
  }

  get isRunning(): boolean {
    return this.child !== undefined;
  }

  async destroy(): Promise<void> {
    await this.stop('SIGKILL');
    rmSync(this.dir, { recursive: true, force: true });
  }
}
