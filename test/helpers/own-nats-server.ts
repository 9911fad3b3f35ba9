/**
 * A nats-server of the test's own (never the shared one on 4222), on a free port with its own
 * JetStream store directory, that the test may stop and start again on the same port and store.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { lazy } from './lazy.js';
import { accepts, binaryAvailable, freePort, OwnServer } from './own-server.js';

export const NATS_SERVER_BIN = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';

/** Whether the binary is there; in CI its absence fails, elsewhere the tests skip with a reason. */
export const natsServerBinaryAvailable = () => binaryAvailable('nats-server', NATS_SERVER_BIN);

export class OwnNatsServer extends OwnServer {
  private constructor(
    port: number,
    readonly storeDir: string,
  ) {
    super('nats-server', port);
  }

  static async create(): Promise<OwnNatsServer> {
    return new OwnNatsServer(await freePort(), mkdtempSync(join(tmpdir(), 'urlshortener-nats-')));
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  protected command() {
    return [NATS_SERVER_BIN, ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', this.storeDir]] as const;
  }

  protected async ready(output: string): Promise<boolean> {
    return /Server is ready/.test(output) && (await accepts(this.port));
  }

  /** Stops it (SIGTERM: JetStream writes its state) and deletes its store. */
  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.storeDir, { recursive: true, force: true });
  }
}

/**
 * A server for the suite this is called in: created in a `beforeAll` (when `when`), and started
 * unless `start` is false; destroyed in its `afterAll`.
 */
export function useOwnNatsServer(when: boolean, { start = true } = {}): OwnNatsServer {
  let server: OwnNatsServer | undefined;
  beforeAll(async () => {
    if (!when) return;
    server = await OwnNatsServer.create();
    if (start) await server.start();
  });
  afterAll(async () => {
    await server?.destroy();
  });
  return lazy(() => {
    if (!server) throw new Error('the nats-server of this suite does not exist (not available, or not created yet)');
    return server;
  });
}
