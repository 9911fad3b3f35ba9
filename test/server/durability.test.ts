import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, type TestDatabase } from '../helpers/backends.js';
import { fetchShorten } from '../helpers/http.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';

/**
 * The real, built server in its own process: what was acknowledged survives a restart and a
 * `kill -9`, and a graceful stop writes the buffered clicks.
 */
const shorten = (server: ServerProcess, code: string) =>
  fetchShorten(server.url, { code, url: `https://example.com/${code}` });

describe.each(BACKENDS)('the server process on $name', (backend) => {
  let database: TestDatabase;
  const env = () => ({ DATABASE_URL: database.databaseUrl, CLICK_FLUSH_INTERVAL_MS: '60000' });

  beforeAll(async () => {
    if (backend.available) database = await backend.create();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it.skipIf(!backend.available)('keeps mappings and flushes buffered clicks across a graceful restart', async () => {
    const first = await startServer(env());
    expect((await shorten(first, 'restart1')).status).toBe(201);
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${first.url}/restart1`, { redirect: 'manual' });
      expect(res.status).toBe(302);
    }
    // The flush interval is a minute: only the shutdown flush can have written these clicks.
    expect(await first.stop('SIGTERM')).toBe(0);
    expect(first.output()).toContain('shut down cleanly');

    const second = await startServer(env());
    try {
      const res = await fetch(`${second.url}/restart1`, { method: 'HEAD', redirect: 'manual' });
      expect(res.status).toBe(302);
      expect(res.headers.get('location')).toBe('https://example.com/restart1');
      const list = (await (await fetch(`${second.url}/urls`)).json()) as { code: string; click_count: number }[];
      expect(list.find((m) => m.code === 'restart1')?.click_count).toBe(5);
    } finally {
      await second.stop();
    }
  });

  it.skipIf(!backend.available)('loses no acknowledged mapping to a kill -9 right after the 201', async () => {
    const server = await startServer(env());
    const acknowledged: string[] = [];
    let killed = false;
    // Many writes in flight; the process is killed the moment the 25th acknowledgement arrives.
    const attempts = Array.from({ length: 60 }, (_, i) => `kill${String(i).padStart(4, '0')}`).map(async (code) => {
      try {
        const res = await shorten(server, code);
        if (res.status === 201 && !killed) {
          acknowledged.push(code);
          if (acknowledged.length === 25) {
            killed = true;
            server.child.kill('SIGKILL');
          }
        }
      } catch {
        // the connection died with the process: not acknowledged
      }
    });
    await Promise.all(attempts);
    await server.stop('SIGKILL');
    expect(acknowledged.length).toBeGreaterThanOrEqual(25);

    const restarted = await startServer(env());
    try {
      for (const code of acknowledged) {
        const res = await fetch(`${restarted.url}/${code}`, { method: 'HEAD', redirect: 'manual' });
        expect(res.status, code).toBe(302);
      }
    } finally {
      await restarted.stop();
    }
  });
});
