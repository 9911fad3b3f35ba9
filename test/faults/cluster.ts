/**
 * What the fault scenarios run against: the fault suite's own PostgreSQL, Redis and NATS
 * (`FaultBackends`, which it may stop, pause and restart), and per scenario a deployment of the
 * built service on a fresh database: two `serve --role api` processes and one or more
 * `serve --role worker` processes, started as `npm start` starts them.
 */
import { NATS_SERVER_BIN, OwnNatsServer } from '../helpers/own-nats-server.js';
import { killOnExit } from '../helpers/own-process.js';
import { OwnRedisServer } from '../helpers/own-redis-server.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { faultBinariesAvailable } from './binaries.js';
import { HttpClient } from './http-client.js';
import { OwnPostgres } from './own-postgres.js';

/** Whether the suite can run here (throws in CI when a binary is missing). */
export function faultSuiteAvailable(): boolean {
  return faultBinariesAvailable(NATS_SERVER_BIN);
}

export class FaultBackends {
  private constructor(
    readonly postgres: OwnPostgres,
    readonly redis: OwnRedisServer,
    readonly nats: OwnNatsServer,
  ) {}

  static async start(): Promise<FaultBackends> {
    const [postgres, redis, nats] = await Promise.all([
      OwnPostgres.create(),
      OwnRedisServer.create(),
      OwnNatsServer.create(),
    ]);
    const backends = new FaultBackends(postgres, redis, nats);
    await backends.ensureUp();
    return backends;
  }

  /** Brings back whatever a scenario left stopped or paused. */
  async ensureUp(): Promise<void> {
    this.redis.resume();
    await Promise.all([this.postgres.start(), this.redis.start(), this.startNats()]);
  }

  startNats(): Promise<void> {
    return this.nats.start();
  }

  stopNats(): Promise<void> {
    return this.nats.stop();
  }

  async destroy(): Promise<void> {
    await Promise.allSettled([this.postgres.destroy(), this.redis.destroy(), this.stopNats()]);
    await this.nats.destroy();
  }
}

const SECRET_KEY = 'fault-suite-secret-key-0123456789abcdefghijkl';
const UNLIMITED = '1000000000';

export interface ClusterOptions {
  readonly workers?: number;
  /** Settings on top of the suite's. */
  readonly env?: Record<string, string>;
}

export class FaultCluster {
  readonly apis: ServerProcess[] = [];
  readonly workers: ServerProcess[] = [];
  /** Processes the scenario killed on purpose. */
  private readonly killed = new Set<ServerProcess>();

  private constructor(
    readonly name: string,
    readonly databaseName: string,
    private readonly env: Record<string, string>,
  ) {}

  /** A fresh database `s_<name>` on the own PostgreSQL, and the processes on it. */
  static async start(backends: FaultBackends, name: string, options: ClusterOptions = {}): Promise<FaultCluster> {
    const databaseName = `s_${name}`;
    const env = {
      DATABASE_URL: await backends.postgres.createDatabase(databaseName),
      REDIS_URL: backends.redis.url,
      REDIS_KEY_PREFIX: `${name}:`,
      NATS_URL: backends.nats.url,
      NATS_PREFIX: `${name}_`,
      SECRET_KEY,
      NODE_ENV: 'test',
      BCRYPT_ROUNDS: '4',
      // Rate limiting on, as by default, so every request asks Redis; never tight enough to refuse.
      RATE_LIMIT_ENABLED: 'true',
      RATE_LIMIT_AUTH_LIMIT: UNLIMITED,
      RATE_LIMIT_WRITES_LIMIT: UNLIMITED,
      RATE_LIMIT_REDIRECTS_LIMIT: UNLIMITED,
      RATE_LIMIT_DEFAULT_LIMIT: UNLIMITED,
      SHUTDOWN_TIMEOUT_MS: '5000',
      ...options.env,
    };
    const cluster = new FaultCluster(name, databaseName, env);
    try {
      // The first runs the migrations; the others find them done.
      cluster.apis.push(await cluster.spawn('api', 'a'));
      const [b, ...workers] = await Promise.all([
        cluster.spawn('api', 'b'),
        ...Array.from({ length: options.workers ?? 1 }, (_, i) => cluster.spawn('worker', String(i + 1))),
      ]);
      cluster.apis.push(b!);
      cluster.workers.push(...workers);
    } catch (error) {
      await cluster.stop();
      throw error;
    }
    return cluster;
  }

  get databaseUrl(): string {
    return this.env.DATABASE_URL!;
  }

  get targets(): string[] {
    return this.apis.map((p) => p.url);
  }

  private async spawn(role: 'api' | 'worker', id: string): Promise<ServerProcess> {
    const process = await startServer({ ...this.env, OTEL_SERVICE_NAME: `${this.name}-${role}-${id}` }, [
      'serve',
      '--role',
      role,
    ]);
    if (process.child.pid) killOnExit(process.child.pid);
    return process;
  }

  async addWorker(): Promise<ServerProcess> {
    const worker = await this.spawn('worker', String(this.workers.length + 1));
    this.workers.push(worker);
    return worker;
  }

  /** Kills a process on purpose (`kill -9` by default). */
  async kill(process: ServerProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    this.killed.add(process);
    await process.stop(signal);
  }

  /** The processes that exited without being told to, with the end of their output. */
  exited(): string[] {
    return [...this.apis, ...this.workers]
      .filter((p) => !this.killed.has(p) && (p.child.exitCode !== null || p.child.signalCode !== null))
      .map(
        (p) =>
          `${p.url} exited (${p.child.exitCode ?? p.child.signalCode}):\n${p.output().split('\n').slice(-40).join('\n')}`,
      );
  }

  /** Lines of the processes' output that match `pattern`, counted. */
  countOutput(pattern: RegExp): number {
    return [...this.apis, ...this.workers].reduce(
      (sum, p) =>
        sum +
        p
          .output()
          .split('\n')
          .filter((line) => pattern.test(line)).length,
      0,
    );
  }

  async stop(): Promise<void> {
    await Promise.all([...this.apis, ...this.workers].map((p) => p.stop('SIGKILL')));
  }
}

/** A user registered and signed in through `base`: the cookie header a browser would send. */
export async function signUp(
  base: string,
  name: string,
): Promise<{ username: string; password: string; cookie: string; csrf: string }> {
  const client = new HttpClient(2);
  try {
    const user = { username: name, email: `${name}@example.com`, password: 'correct horse battery' };
    const registered = await client.request(base, 'POST', '/api/v1/auth/register', { body: user });
    if (registered.status !== 201) throw new Error(`register ${name}: ${registered.status} ${registered.body}`);
    return { ...user, ...(await logIn(client, base, user.username, user.password)) };
  } finally {
    client.close();
  }
}

export async function logIn(
  client: HttpClient,
  base: string,
  username: string,
  password: string,
): Promise<{ cookie: string; csrf: string }> {
  const answer = await client.request(base, 'POST', '/api/v1/auth/login', { body: { username, password } });
  if (answer.status !== 200) throw new Error(`login ${username}: ${answer.status} ${answer.body}`);
  const cookies = new Map(
    (answer.headers['set-cookie'] ?? []).map((line) => {
      const [pair] = line.split(';');
      const at = pair!.indexOf('=');
      return [pair!.slice(0, at), pair!.slice(at + 1)] as const;
    }),
  );
  const access = cookies.get('access_token');
  const csrf = cookies.get('csrf_token');
  if (!access || !csrf) throw new Error(`login ${username}: no session cookies`);
  return { cookie: `access_token=${access}; csrf_token=${csrf}`, csrf };
}
