/**
 * A PostgreSQL server of the fault suite's own (never the shared one on 5432): a fresh cluster
 * in a temporary directory, on a free port, trust authentication, that the suite may stop
 * (`fast` or `immediate`), start again on the same port and data, and whose connections it may
 * terminate. As root it runs as the `postgres` user (`runuser`), as PostgreSQL requires.
 *
 * Speed: `fsync=off`. A crash of the server process (`immediate`) still loses nothing committed,
 * since the written WAL is in the operating system's cache; only a crash of the machine could.
 * `synchronous_commit` stays on, so a commit is in the WAL before the client hears of it.
 */
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { forget, killOnExit } from '../helpers/own-process.js';
import { freePort } from '../helpers/own-server.js';
import { asRoot, postgresBinDir, RUNUSER_BIN } from './binaries.js';

const run = promisify(execFile);

export type StopMode = 'fast' | 'immediate';

export class OwnPostgres {
  private running = false;

  private constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly bin: string,
  ) {}

  /** Creates the cluster (initdb); `start()` runs it. */
  static async create(): Promise<OwnPostgres> {
    const bin = postgresBinDir();
    if (!bin) throw new Error('PostgreSQL server binaries not found');
    const dir = mkdtempSync(join(tmpdir(), 'urlshortener-faults-pg-'));
    if (asRoot) {
      const [uid, gid] = await Promise.all(
        ['-u', '-g'].map(async (flag) => (await run('id', [flag, 'postgres'])).stdout),
      );
      chownSync(dir, Number(uid), Number(gid));
    }
    const server = new OwnPostgres(await freePort(), dir, bin);
    await server.exec('initdb', ['-D', server.dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync']);
    return server;
  }

  private get dataDir(): string {
    return join(this.dir, 'data');
  }

  /** The superuser's URL for `database` (default: the `postgres` maintenance database). */
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  log(): string {
    const file = join(this.dir, 'postgres.log');
    return existsSync(file) ? readFileSync(file, 'utf8') : '';
  }

  /** Runs a PostgreSQL program, as `postgres` when this process is root. */
  private async exec(program: string, args: string[]): Promise<string> {
    const path = join(this.bin, program);
    const [file, argv] = asRoot ? [RUNUSER_BIN, ['-u', 'postgres', '--', path, ...args]] : [path, args];
    try {
      return (await run(file, argv, { cwd: this.dir, timeout: 60_000 })).stdout;
    } catch (error) {
      const { stdout, stderr } = error as { stdout?: string; stderr?: string };
      throw new Error(
        `${program} ${args.join(' ')} failed: ${stderr ?? ''}${stdout ?? ''}\n${this.log().slice(-2000)}`,
        { cause: error },
      );
    }
  }

  /** Starts the server (same port and data as before) and waits until it accepts connections. */
  async start(): Promise<void> {
    if (this.running) return;
    const options = [
      `-p ${this.port}`,
      '-c listen_addresses=127.0.0.1',
      `-c unix_socket_directories=${this.dir}`,
      '-c fsync=off',
      '-c max_connections=200',
    ].join(' ');
    await this.exec('pg_ctl', [
      '-D',
      this.dataDir,
      '-l',
      join(this.dir, 'postgres.log'),
      '-o',
      options,
      '-w',
      '-t',
      '60',
      'start',
    ]);
    this.running = true;
    const pid = this.pid();
    if (pid) killOnExit(pid, 'SIGQUIT');
  }

  /** Stops the server: `fast` disconnects the clients and shuts down cleanly, `immediate` is a crash. */
  async stop(mode: StopMode = 'fast'): Promise<void> {
    if (!this.running) return;
    const pid = this.pid();
    if (pid) forget(pid);
    await this.exec('pg_ctl', ['-D', this.dataDir, '-m', mode, '-w', '-t', '60', 'stop']);
    this.running = false;
  }

  async restart(mode: StopMode = 'fast'): Promise<void> {
    await this.stop(mode);
    await this.start();
  }

  get isRunning(): boolean {
    return this.running;
  }

  /** The postmaster's process id, while it runs. */
  pid(): number | undefined {
    const file = join(this.dataDir, 'postmaster.pid');
    if (!existsSync(file)) return undefined;
    const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  }

  async query<R extends pg.QueryResultRow>(sql: string, params: unknown[] = [], database = 'postgres'): Promise<R[]> {
    const client = new pg.Client({ connectionString: this.url(database) });
    client.on('error', () => undefined);
    await client.connect();
    try {
      return (await client.query<R>(sql, params)).rows;
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async createDatabase(name: string): Promise<string> {
    if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`bad database name ${name}`);
    await this.query(`CREATE DATABASE ${name}`);
    return this.url(name);
  }

  /** Terminates every client connection to `database` (what a failover or an idle reaper does); returns how many. */
  async terminateConnections(database: string): Promise<number> {
    const rows = await this.query<{ terminated: boolean }>(
      `SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity
        WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
      [database],
    );
    return rows.filter((r) => r.terminated).length;
  }

  async destroy(): Promise<void> {
    await this.stop('immediate').catch(() => {
      const pid = this.pid();
      if (pid) process.kill(pid, 'SIGQUIT');
    });
    rmSync(this.dir, { recursive: true, force: true });
  }
}
