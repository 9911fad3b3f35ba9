import net from 'node:net';
import { POSTGRES_URL } from './services.js';

type Mode = 'pass' | 'refuse' | 'blackhole' | 'partition';

/** A PostgreSQL simple-protocol query message (`Q`, its length, the text) that is COMMIT: how Kysely ends a transaction. */
export const PG_COMMIT = /^Q[\s\S]{4}commit\0/i;

/**
 * A TCP proxy on 127.0.0.1 in front of a backend, that a test can cut: `refuse` closes every
 * connection and resets each new one at once (a server that is down), `blackhole` closes every
 * connection and accepts new ones without ever answering (a host that is unreachable), `pass`
 * forwards again. `partition` cuts the path between client and server without either hearing of
 * it (a host gone, a network split): nothing more passes on the connections open, neither side
 * hears when the other closes (no FIN crosses), and new connections are accepted and never
 * answered; `pass` after it resets the clients whose server side has closed meanwhile, and
 * `close` closes every side. It listens on one port from `start` to `close`, whatever the mode:
 * a port let go while the backend is "down" could be taken by another test file's process
 * meanwhile, whose server the clients would then reach instead.
 */
export class TcpProxy {
  private readonly sockets = new Set<net.Socket>();
  /** The connections forwarded: `partition` cuts them. */
  private readonly paths = new Set<{ cut: boolean; readonly client: net.Socket; readonly upstream: net.Socket }>();
  private mode: Mode = 'pass';
  /** Connections reset by `refuse` so far: how often a client has tried meanwhile. */
  refused = 0;
  /** Connections forwarded to the backend so far. */
  forwarded = 0;
  /** Armed by `loseAnswerTo`: the request to deliver unanswered, and what to tell once it was. */
  private unanswered: { pattern: RegExp; after?: RegExp; lost: () => void } | undefined;

  private constructor(
    private readonly target: { host: string; port: number },
    private readonly server: net.Server,
  ) {
    server.on('connection', (client) => this.accept(client));
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  static async start(targetHost: string, targetPort: number): Promise<TcpProxy> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
    return new TcpProxy({ host: targetHost, port: targetPort }, server);
  }

  async pass(): Promise<void> {
    this.mode = 'pass';
    // Back from a partition: a client whose session the server ended meanwhile hears so at once
    // (a reset, as at its next packet). A cut connection the server still holds stays cut.
    for (const path of this.paths) if (path.cut && path.upstream.destroyed) path.client.destroy();
  }

  async refuse(): Promise<void> {
    this.mode = 'refuse';
    this.dropAll();
  }

  async blackhole(): Promise<void> {
    this.mode = 'blackhole';
    this.dropAll();
  }

  /** Cuts the open connections without closing them (see above); `pass` forwards new ones again. */
  async partition(): Promise<void> {
    this.mode = 'partition';
    await this.cutOpen();
  }

  /**
   * Cuts the connections open now, as `partition` does, and forwards new ones: a NAT or stateful
   * firewall between the two that dropped the open connections' state (an idle timeout, a
   * failover) without telling either side.
   */
  async cutOpen(): Promise<void> {
    for (const path of this.paths) path.cut = true;
  }

  /**
   * The next request (a client's write) that matches `pattern` reaches the backend, and its
   * connection is cut as the backend's answer arrives, before the client sees it: a PostgreSQL
   * COMMIT (`PG_COMMIT`) that went through unanswered. With `after`, only
   * on a connection that sent a request matching `after` first (one transaction's COMMIT among
   * the pool's). Resolves once it happened.
   */
  loseAnswerTo(pattern: RegExp, after?: RegExp): Promise<void> {
    return new Promise((resolve) => (this.unanswered = { pattern, ...(after ? { after } : {}), lost: resolve }));
  }

  async close(): Promise<void> {
    this.mode = 'refuse';
    this.dropAll();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private accept(client: net.Socket): void {
    if (this.mode === 'refuse') {
      this.refused++;
      client.on('error', () => undefined).resetAndDestroy();
      return;
    }
    this.track(client);
    if (this.mode === 'blackhole' || this.mode === 'partition') return;
    this.forwarded++;
    const upstream = net.connect(this.target.port, this.target.host);
    this.track(upstream);
    let cutOnAnswer: (() => void) | undefined;
    let sentAfter = false;
    const path = { cut: false, client, upstream };
    this.paths.add(path);
    const isCut = () => path.cut;
    forward(
      client,
      upstream,
      (data) => {
        const armed = this.unanswered;
        if (!armed) return;
        const text = data.toString('latin1');
        if (armed.after?.test(text)) sentAfter = true;
        if ((armed.after === undefined || sentAfter) && armed.pattern.test(text)) {
          this.unanswered = undefined;
          cutOnAnswer = armed.lost;
        }
      },
      isCut,
    );
    forward(
      upstream,
      client,
      () => {
        if (!cutOnAnswer) return true;
        client.destroy();
        upstream.destroy();
        cutOnAnswer();
        return false;
      },
      isCut,
    );
    // Across a partition neither side hears that the other closed.
    client.on('close', () => {
      this.paths.delete(path);
      if (!path.cut) upstream.destroy();
    });
    upstream.on('close', () => {
      if (!path.cut) client.destroy();
    });
  }

  private dropAll(): void {
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on('error', () => undefined).on('close', () => this.sockets.delete(socket));
  }
}

/**
 * Writes what `from` reads to `to`, pausing while `to` is full (what `pipe` does), after
 * `inspect` has seen it; `inspect` answering false drops it. Once `cut`, nothing passes: neither
 * what `from` reads nor its end (which ends `to` otherwise).
 */
function forward(
  from: net.Socket,
  to: net.Socket,
  inspect: (data: Buffer) => boolean | void,
  cut: () => boolean = () => false,
): void {
  from.on('data', (data: Buffer) => {
    if (cut() || inspect(data) === false || to.destroyed) return;
    if (!to.write(data)) from.pause();
  });
  to.on('drain', () => from.resume());
  from.on('end', () => {
    if (!cut()) to.end();
  });
}

/**
 * A proxy in front of the test PostgreSQL server, and `databaseUrl` (a test database on it) through
 * that proxy: what a process under test connects to, so that the test can cut it off alone.
 */
export async function postgresBehindProxy(databaseUrl: string): Promise<{ proxy: TcpProxy; url: string }> {
  const target = new URL(POSTGRES_URL);
  const proxy = await TcpProxy.start(target.hostname, Number(target.port || 5432));
  const url = new URL(databaseUrl);
  url.host = `127.0.0.1:${proxy.port}`;
  return { proxy, url: url.toString() };
}
