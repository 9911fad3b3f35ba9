/**
 * Issue 16's browser-side hardening, in Debian's headless Chromium against the built server: a
 * page on another site that auto-submits a login form (login CSRF) is refused and sets no session
 * cookie; `/docs/` renders under its Content-Security-Policy and cannot be framed by another site.
 */
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { chromiumAvailable, launchChromium } from './browser.js';

const available = chromiumAvailable();
const VICTIM = { username: 'xsite_victim', email: 'xsite_victim@example.com', password: 'victim-password-1' };

describe.skipIf(!available)('hardening in Chromium', () => {
  let server: ServerProcess;
  let attacker: Server;
  let attackerOrigin: string;
  let browser: Browser;
  let context: BrowserContext;
  let dataDir: string;
  /** What the attacker's site serves at `/`. */
  let attackerPage = '';

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'urlshortener-e2e-hardening-'));
    server = await startServer({
      NODE_ENV: 'test',
      BCRYPT_ROUNDS: '4',
      RATE_LIMIT_ENABLED: 'false',
      OTEL_SDK_DISABLED: 'true',
      DATABASE_URL: `sqlite:${join(dataDir, 'e2e.db')}`,
      // An account of the attacker's own, which the forged login would sign the visitor in to.
      ADMIN_USERNAME: VICTIM.username,
      ADMIN_EMAIL: VICTIM.email,
      ADMIN_PASSWORD: VICTIM.password,
    });
    // Another site: `localhost` is a different site from `127.0.0.1`.
    attacker = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'text/html' }).end(attackerPage);
    });
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    attackerOrigin = `http://localhost:${(attacker.address() as AddressInfo).port}`;
    browser = await launchChromium();
    context = await browser.newContext();
    context.setDefaultTimeout(10_000);
  });

  afterAll(async () => {
    await browser?.close();
    attacker?.close();
    await server?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('refuses a login form auto-submitted by another site: 403, no session cookie', async () => {
    attackerPage = `<!doctype html><form method="post" action="${server.url}/api/v1/auth/login">
      <input name="username" value="${VICTIM.username}"><input name="password" value="${VICTIM.password}">
      </form><script>document.forms[0].submit()</script>`;
    const page = await context.newPage();
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url() === `${server.url}/api/v1/auth/login`),
      page.goto(attackerOrigin),
    ]);
    expect(response.status()).toBe(403);
    expect(await response.json()).toEqual({
      detail: 'Cross-site request refused: sign in, sign up and sign out only from this site',
    });
    const cookies = await context.cookies(server.url);
    expect(cookies.map((c) => c.name)).not.toContain('access_token');
    await page.close();
  });

  it('signs in from the site itself, the same form included', async () => {
    const page = await context.newPage();
    await page.goto(`${server.url}/docs/`);
    const status = await page.evaluate(async ({ username, password }) => {
      const body = new URLSearchParams({ username, password });
      return (await fetch('/api/v1/auth/login', { method: 'POST', body })).status;
    }, VICTIM);
    expect(status).toBe(200);
    expect((await context.cookies(server.url)).map((c) => c.name)).toContain('access_token');
    await context.clearCookies();
    await page.close();
  });

  it('renders /docs/ under its Content-Security-Policy, with no violation', async () => {
    const page = await context.newPage();
    const violations: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text());
    });
    await page.goto(`${server.url}/docs/`);
    await eventually(async () => expect(await page.locator('.opblock').count()).toBeGreaterThan(3), {
      timeoutMs: 10_000,
    });
    expect(await page.locator('text=/shorten').first().isVisible()).toBe(true);
    expect(violations, violations.join('\n')).toEqual([]);
    await page.close();
  });

  it('cannot be framed by another site', async () => {
    attackerPage = `<!doctype html><iframe src="${server.url}/docs/" width="800" height="600"></iframe>`;
    const page = await context.newPage();
    await page.goto(attackerOrigin);
    await page.waitForTimeout(1500);
    const framed = page.frames().find((frame) => frame !== page.mainFrame());
    // Chromium blocks the frame: it shows its own error page, never the documentation.
    const rendered = framed
      ? await framed
          .locator('.swagger-ui')
          .count()
          .catch(() => 0)
      : 0;
    expect(rendered).toBe(0);
    await page.close();
  });
});
