import net from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 in front of a backend, that a test can cut: `refuse` closes every
 * connection and refuses new ones (a server that is down), `blackhole` closes every connection
 * and accepts new ones without ever answering (a host that is unreachable), `pass` forwards again.
 */
export class TcpProxy {
  private readonly sockets = new Set<net.Socket>();
  private server: net.Server | undefined;
  private mode: 'pass' | 'blackhole' = 'pass';

  private constructor(
    private readonly target: { host: string; port: number },
    readonly port: number,
  ) {}

  static async start(targetHost: string, targetPort: number): Promise<TcpProxy> {
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const proxy = new TcpProxy({ host: targetHost, port: targetPort }, port);
    await proxy.listen();
    return proxy;
  }

  async pass(): Promise<void> {
    this.mode = 'pass';
    await this.listen();
  }

  async refuse(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.dropAll();
    if (server) await new Promise((resolve) => server.close(resolve));
  }

  async blackhole(): Promise<void> {
    this.mode = 'blackhole';
    this.dropAll();
    await this.listen();
  }

  close(): Promise<void> {
    return this.refuse();
  }

  private dropAll(): void {
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on('error', () => undefined).on('close', () => this.sockets.delete(socket));
  }

  private async listen(): Promise<void> {
    if (this.server) return;
    const server = net.createServer((client) => {
      this.track(client);
      if (this.mode === 'blackhole') return;
      const upstream = net.connect(this.target.port, this.target.host);
      this.track(upstream);
      client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
  }
}
