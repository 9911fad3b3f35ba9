import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, chromium, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, expect } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { type ServerProcess, startServer } from '../helpers/server-process.js';
import { inCi } from '../helpers/services.js';

/** Debian's Chromium (`apt-get install chromium`); Playwright never downloads a browser here. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const SCREENSHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');
const WEB_DIST_INDEX = join(import.meta.dirname, '..', '..', 'web', 'dist', 'index.html');

/** Whether the browser tests can run; in CI (`CI=true`) a missing Chromium fails them instead. */
export function chromiumAvailable(): boolean {
  if (existsSync(CHROMIUM_PATH)) return true;
  const message = `Chromium is not installed at ${CHROMIUM_PATH} (apt-get install chromium)`;
  if (inCi) throw new Error(`${message}; CI requires it`);
  console.warn(`skipping browser tests: ${message}`);
  return false;
}

export function requireBuiltClient(): void {
  if (!existsSync(WEB_DIST_INDEX)) throw new Error('web/dist is missing: run `npm run build` before the browser tests');
}

/**
 * Headless Chromium with no background traffic (the machine's network is closed). Playwright gives
 * each launch a fresh, empty profile directory of its own (it refuses `--user-data-dir` in `args`).
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** Saves a full-page screenshot as a test artefact: test-results/screenshots/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

// Waiting assertions on page content (playwright-core has no `expect` of its own).
const text = async (locator: Locator) => (await locator.innerText({ timeout: 1000 })).trim();

export const hasText = (locator: Locator, expected: string) =>
  eventually(async () => expect(await text(locator)).toBe(expected));

export const containsText = (locator: Locator, expected: string) =>
  eventually(async () => expect(await text(locator)).toContain(expected));

export const lacksText = (locator: Locator, unexpected: string) =>
  eventually(async () => expect(await text(locator)).not.toContain(unexpected));

export const hasValue = (locator: Locator, expected: string) =>
  eventually(async () => expect(await locator.inputValue({ timeout: 1000 })).toBe(expected));

/** Waits until nothing matches `locator`. */
export const isGone = (locator: Locator) => eventually(async () => expect(await locator.count()).toBe(0));

/** What `useServerAndChromium` holds for a suite, set before its tests run. */
export interface ServerAndChromium {
  server: ServerProcess;
  browser: Browser;
  /** The server's SQLite file (tests may write rows a page must show, as another process would). */
  databaseFile: string;
}

/**
 * The built service on a SQLite file of its own (rate limits and tracing off, `admin` its
 * administrator, any further settings in `env`) and headless Chromium: started before the suite's
 * tests, stopped after them.
 */
export function useServerAndChromium(
  name: string,
  admin: { readonly username: string; readonly email: string; readonly password: string },
  env: Record<string, string> = {},
): ServerAndChromium {
  const held = {} as ServerAndChromium;
  let dataDir: string | undefined;
  beforeAll(async () => {
    requireBuiltClient();
    dataDir = mkdtempSync(join(tmpdir(), `urlshortener-e2e-${name}-`));
    held.databaseFile = join(dataDir, 'e2e.db');
    held.server = await startServer({
      NODE_ENV: 'test',
      BCRYPT_ROUNDS: '4',
      RATE_LIMIT_ENABLED: 'false',
      OTEL_SDK_DISABLED: 'true',
      DATABASE_URL: `sqlite:${held.databaseFile}`,
      ADMIN_USERNAME: admin.username,
      ADMIN_EMAIL: admin.email,
      ADMIN_PASSWORD: admin.password,
      ...env,
    });
    held.browser = await launchChromium();
  });
  afterAll(async () => {
    await held.browser?.close();
    await held.server?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });
  return held;
}

/** The two screens the pages are tried on: a desktop and a 390 px wide phone. */
export const SCREENS = [
  { name: 'desktop', options: { viewport: { width: 1280, height: 800 } } },
  { name: 'phone', options: { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true } },
] as const;

/** Fails when the page is wider than the window (sideways scrolling). */
export async function noSidewaysScroll(page: Page): Promise<void> {
  // A string, not a function: the tests are type-checked without the DOM library.
  const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
  expect(overflow).toBeLessThanOrEqual(0);
}

/** Registers `username` through the API (201 expected). */
export async function registerUser(serverUrl: string, username: string, password: string): Promise<void> {
  const response = await fetch(`${serverUrl}/api/v1/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, email: `${username}@example.com`, password }),
  });
  expect(response.status).toBe(201);
}

/** A new page of `context` at `path`, after logging in as `username` on the login page it is sent to. */
export async function openAs(
  context: BrowserContext,
  serverUrl: string,
  path: string,
  username: string,
  password: string,
): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${serverUrl}${path}`);
  await page.waitForURL(/\/app\/login\?next=/);
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByLabel('Password').press('Enter');
  await page.waitForURL(`${serverUrl}${path}`);
  return page;
}
