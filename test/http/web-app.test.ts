import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerErrorHandling } from '../../src/http/error-handler.js';
import { webAppRoutes } from '../../src/http/routes/web-app.js';
import { expectError } from '../helpers/http.js';

/** The web client's files under /app/ (design §3), on a stand-in build of `web/dist`. */
describe('web client routes', () => {
  const dirs: string[] = [];
  const appServing = async (root: string): Promise<FastifyInstance> => {
    const app = Fastify({ logger: false });
    registerErrorHandling(app, 1024);
    await app.register(webAppRoutes, { root });
    await app.ready();
    return app;
  };
  let app: FastifyInstance;
  let unbuilt: FastifyInstance;

  beforeAll(async () => {
    const built = mkdtempSync(join(tmpdir(), 'web-dist-'));
    dirs.push(built);
    mkdirSync(join(built, 'assets'));
    writeFileSync(join(built, 'index.html'), '<!doctype html><title>app</title>');
    writeFileSync(join(built, 'assets', 'index-abc123.js'), 'console.log(1)');
    const empty = mkdtempSync(join(tmpdir(), 'web-none-'));
    dirs.push(empty);
    app = await appServing(built);
    unbuilt = await appServing(empty);
  });
  afterAll(async () => {
    await app?.close();
    await unbuilt?.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it.each(['/', '/app'])('GET %s → 302 to /app/', async (url) => {
    const response = await app.inject({ url });
    expect(response.statusCode).toBe(302);
    expect(response.headers.location).toBe('/app/');
  });

  it.each(['/app/', '/app/links', '/app/admin/settings', '/app/login?next=%2Fapp%2Flinks'])(
    'GET %s → index.html, revalidated, with a content security policy',
    async (url) => {
      const response = await app.inject({ url });
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toMatch(/^text\/html/);
      expect(response.body).toContain('<title>app</title>');
      expect(response.headers['cache-control']).toBe('no-cache');
      expect(response.headers['content-security-policy']).toContain("default-src 'self'");
    },
  );

  it('a hashed asset is served as immutable', async () => {
    const response = await app.inject({ url: '/app/assets/index-abc123.js' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/javascript/);
    expect(response.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(response.body).toBe('console.log(1)');
  });

  it.each(['/app/assets/missing.js', '/app/favicon.ico', '/app/%2e%2e/%2e%2e/package.json'])(
    'a file that is not there → 404 {detail}, never index.html: %s',
    async (url) => {
      expectError(await app.inject({ url }), 404, 'Not found');
    },
  );

  it('a path climbing out of the build → 403 {detail}', async () => {
    expectError(await app.inject({ url: '/app/..%2f..%2fetc%2fpasswd.txt' }), 403);
  });

  // The path forms of @fastify/static's 2026 advisories (scripts/advisories.json): never a file
  // outside the build, always {detail}.
  it.each([
    '/app/assets/../../package.json',
    '/app/assets/%2e%2e/%2e%2e/package.json',
    '/app/assets/%2E%2E%2f%2E%2E%2fpackage.json',
    '/app/./assets/../../../package.json',
    '/app//..//..//package.json',
    '/app/assets/..%5c..%5cpackage.json',
  ])('a traversal in any spelling never leaves the build: %s', async (url) => {
    const response = await app.inject({ url });
    expect([403, 404], response.body).toContain(response.statusCode);
    expect(Object.keys(response.json<object>())).toEqual(['detail']);
  });

  it('without a build, /app/ answers 503 saying how to build it', async () => {
    expectError(await unbuilt.inject({ url: '/app/links' }), 503, 'The web client is not built; run npm run build');
    expect((await unbuilt.inject({ url: '/' })).statusCode).toBe(302);
  });
});
