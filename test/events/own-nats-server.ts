/**
 * A nats-server of the test's own (never the shared one on 4222), on a free port with its own
 * JetStream store directory, that the test may stop and start again on the same port and store.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inCi } from '../helpers/services.js';

export const NATS_SERVER_BIN = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';

/** Whether the binary is there; in CI its absence fails, elsewhere the tests skip with a reason. */
export function natsServerBinaryAvailable(): boolean {
  if (existsSync(NATS_SERVER_BIN)) return true;
  const message = `nats-server binary not found at ${NATS_SERVER_BIN}`;
  if (inCi) throw new Error(`${message}; CI requires it`);
  console.warn(`skipping own-nats-server tests: ${message}`);
  return false;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function reachable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export class OwnNatsServer {
  private child: ChildProcess | undefined;
  private log = '';

  private constructor(
    readonly port: number,
    readonly storeDir: string,
  ) {}

  static async create(): Promise<OwnNatsServer> {
    return new OwnNatsServer(await freePort(), mkdtempSync(join(tmpdir(), 'urlshortener-nats-')));
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  output(): string {
    return this.log;
  }

  /** The server's process id while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Starts the server (same port, same store as before) and waits until it accepts connections. */
  async start(): Promise<void> {
    if (this.child) return;
    const child = spawn(NATS_SERVER_BIN, ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', this.storeDir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stdout?.on('data', (c: Buffer) => (this.log += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (this.log += c.toString()));
    const deadline = Date.now() + 10_000;
    while (!/Server is ready/.test(this.log) || !(await reachable(this.port))) {
      if (child.exitCode !== null) throw new Error(`nats-server exited with ${child.exitCode}:\n${this.log}`);
      if (Date.now() > deadline) throw new Error(`nats-server did not start:\n${this.log}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Stops it (SIGTERM: JetStream writes its state) and waits until the process has gone. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.child = undefined;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }

  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.storeDir, { recursive: true, force: true });
  }
}
