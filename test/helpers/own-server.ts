/**
 * A server process of the test's own (never a shared one), on a free port: the test starts and
 * stops it (same port each time), may pause it (SIGSTOP: connections stay open, nothing is
 * answered) and resume it; it is killed when the test process exits, whatever happened.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { forget, killOnExit } from './own-process.js';
import { inCi } from './services.js';

/** Whether the server binary `path` is there; in CI its absence fails, elsewhere the tests skip with a reason. */
export function binaryAvailable(name: string, path: string): boolean {
  if (existsSync(path)) return true;
  const message = `${name} binary not found at ${path}`;
  if (inCi) throw new Error(`${message}; CI requires it`);
  console.warn(`skipping own-${name} tests: ${message}`);
  return false;
}

/**
 * The first of the ports the kernel hands out by itself (to `listen(0)`, and to a client's end of
 * a connection): `freePort` keeps below it.
 */
function ephemeralPortsFrom(): number {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (low! > FREE_PORTS_FROM + 1000) return low!;
  } catch {
    // not Linux: the IANA range
  }
  return 49152;
}

/** Where `freePort` starts: above the ports of the services the tests use (5432, 6379, 4222...). */
const FREE_PORTS_FROM = 10_000;

/** Whether `port` on 127.0.0.1 can be listened on now. */
function listenable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A port free now, for a server the test stops and starts again on it. Outside the kernel's
 * ephemeral range, so that while the server is stopped no other process is given its port by
 * `listen(0)`, and no client reconnecting to it gets it as its own end (a connection to itself):
 * either would make a stopped server look back, the likeliest cause of test/backends/redis-link
 * seeing Redis "away" and "back" twice in one outage (a Node 24 pass, 2026-12-02).
 */
export async function freePort(): Promise<number> {
  const low = ephemeralPortsFrom();
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = FREE_PORTS_FROM + Math.floor(Math.random() * (low - FREE_PORTS_FROM));
    if (await listenable(port)) return port;
  }
  throw new Error(`no free port found between ${FREE_PORTS_FROM} and ${low}`);
}

/** Whether something on 127.0.0.1:`port` accepts a connection. */
export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export abstract class OwnServer {
  private child: ChildProcess | undefined;
  private paused = false;
  private log = '';

  protected constructor(
    private readonly name: string,
    readonly port: number,
  ) {}

  /** The binary and its arguments. */
  protected abstract command(): readonly [string, readonly string[]];

  /** Whether the started server takes requests, judged by its output so far and its port. */
  protected abstract ready(output: string): Promise<boolean>;

  output(): string {
    return this.log;
  }

  /** The server's process id while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  get isRunning(): boolean {
    return this.child !== undefined;
  }

  /** Starts it (same port as before) and waits until it is ready. */
  async start(): Promise<void> {
    if (this.child) return;
    const [bin, args] = this.command();
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    if (child.pid) killOnExit(child.pid);
    child.stdout?.on('data', (c: Buffer) => (this.log += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (this.log += c.toString()));
    const deadline = Date.now() + 10_000;
    while (!(await this.ready(this.log))) {
      if (child.exitCode !== null) throw new Error(`${this.name} exited with ${child.exitCode}:\n${this.log}`);
      if (Date.now() > deadline) throw new Error(`${this.name} did not start:\n${this.log}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  /** Stops it with `signal` and waits until the process has gone. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.child = undefined;
    if (child.pid) forget(child.pid);
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    if (this.paused) child.kill('SIGCONT'); // a paused server would not act on the signal
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
}
