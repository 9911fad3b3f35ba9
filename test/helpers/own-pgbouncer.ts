/**
 * A PgBouncer of the test's own (Debian's `pgbouncer`), on a free port, in front of the test
 * PostgreSQL server in transaction pooling: a client's connection is the pooler's, and each of its
 * transactions runs on whichever server session is free. It trusts every client (`auth_type =
 * any`) and logs in as the test server's user. Paused (SIGSTOP), it is a pooler that stopped
 * answering.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { accepts, binaryAvailable, freePort, OwnServer } from './own-server.js';
import { POSTGRES_URL } from './services.js';

export const PGBOUNCER_BIN = process.env.PGBOUNCER_BIN ?? '/usr/sbin/pgbouncer';

/** Whether the binary is there; in CI its absence fails, elsewhere the tests skip with a reason. */
export const pgbouncerBinaryAvailable = () => binaryAvailable('pgbouncer', PGBOUNCER_BIN);

export class OwnPgBouncer extends OwnServer {
  private readonly target = new URL(POSTGRES_URL);

  private constructor(
    port: number,
    private readonly config: string,
  ) {
    super('pgbouncer', port);
  }

  static async create(): Promise<OwnPgBouncer> {
    const port = await freePort();
    const target = new URL(POSTGRES_URL);
    const dir = mkdtempSync(join(tmpdir(), 'urlshortener-pgbouncer-'));
    const config = join(dir, 'pgbouncer.ini');
    const database = target.pathname.slice(1);
    const lines = [
      '[databases]',
      `${database} = host=${target.hostname} port=${target.port || 5432} dbname=${database} user=${decodeURIComponent(target.username)}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'auth_type = any',
      'pool_mode = transaction',
      'default_pool_size = 4',
      'max_client_conn = 50',
      // Its Unix socket would go to /tmp; this one needs none.
      'unix_socket_dir =',
    ];
    writeFileSync(config, `${lines.join('\n')}\n`, { mode: 0o644 });
    return new OwnPgBouncer(port, config);
  }

  /** A database URL through the pooler (the test database itself, not one of its schemas). */
  get url(): string {
    const url = new URL(this.target);
    url.host = `127.0.0.1:${this.port}`;
    return url.toString();
  }

  protected command() {
    // It will not run as root: as root, it is told to switch to the server's own user.
    const asUser = process.getuid?.() === 0 ? ['-u', 'postgres'] : [];
    return [PGBOUNCER_BIN, [...asUser, this.config]] as const;
  }

  protected ready(): Promise<boolean> {
    return accepts(this.port);
  }
}
