import net from 'node:net';

/**
 * External services the tests use. In CI (`CI=true`) a missing service fails the suite; elsewhere
 * the tests that need it are skipped with a printed reason.
 */
export const inCi = process.env.CI === 'true';

export const POSTGRES_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

function reachable(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Whether the service at `url` answers; throws in CI when it does not. */
export async function requireService(name: string, url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  if (await reachable(hostname, Number(port))) return true;
  const message = `${name} is not reachable at ${hostname}:${port}`;
  if (inCi) throw new Error(`${message}; CI requires it`);
  console.warn(`skipping ${name} tests: ${message}`);
  return false;
}

export const postgresAvailable = await requireService('PostgreSQL', POSTGRES_URL);

export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
export const NATS_URL = process.env.TEST_NATS_URL ?? 'nats://127.0.0.1:4222';

/** Lazily checked, so suites that do not need Redis or NATS do not probe them. */
export const redisAvailable = () => requireService('Redis', REDIS_URL);
export const natsAvailable = () => requireService('NATS', NATS_URL.replace(/^nats:/, 'http:'));
