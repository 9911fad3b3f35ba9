import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import type { BrowserContext, Page } from 'playwright-core';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  chromiumAvailable,
  containsText,
  hasText,
  hasValue,
  isGone,
  lacksText,
  screenshot,
  useServerAndChromium,
} from './browser.js';

/**
 * The web client (issue #7, design §3, spec §5.7) in Debian's headless Chromium against the real
 * built server, started the way `npm start` starts it.
 */
const available = chromiumAvailable();
const ADMIN = { username: 'root_admin', email: 'admin@example.com', password: 'admin-password-1' };
const PASSWORD = 'correct-horse-9';
const LOCKED = 'Account locked due to too many failed attempts';

describe.skipIf(!available)('web client in Chromium', () => {
  const e2e = useServerAndChromium('web', ADMIN);
  let context: BrowserContext;
  let page: Page;
  let userCount = 0;
  const newUsername = (prefix: string) => `${prefix}_${process.pid}_${++userCount}`;
  const at = (path: string) => `${e2e.server.url}${path}`;

  beforeEach(async () => {
    await context?.close();
    context = await e2e.browser.newContext({ viewport: { width: 1280, height: 800 } });
    context.setDefaultTimeout(10_000);
    page = await context.newPage();
  });

  async function register(username: string, password = PASSWORD) {
    await page.goto(at('/app/register'));
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Email').fill(`${username}@example.com`);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Create account' }).click();
  }

  /** Logs in on the login page already shown, submitting with the Enter key; the server's status. */
  async function logInHere(username: string, password = PASSWORD): Promise<number> {
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Password').fill(password);
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/api/v1/auth/login')),
      page.getByLabel('Password').press('Enter'),
    ]);
    return response.status();
  }

  async function signUpAndLogIn(prefix: string) {
    const username = newUsername(prefix);
    await register(username);
    await page.waitForURL(at('/app/login'));
    await logInHere(username);
    await page.waitForURL(at('/app/links'));
    return username;
  }

  const linkCard = (code: string) => page.getByRole('listitem', { name: `Link ${code}`, exact: true });

  it('/ opens the app, and an unknown visitor is sent to log in', async () => {
    await page.goto(e2e.server.url);
    await page.waitForURL(at('/app/login?next=%2Fapp%2Flinks'));
    await hasText(page.getByRole('heading', { level: 1 }), 'Log in');
    await screenshot(page, 'login');
  });

  it('register, log in, create a link, follow it, see the count rise, edit and delete it', async () => {
    const username = newUsername('links');
    await register(username);
    await screenshot(page, 'register');
    await page.waitForURL(at('/app/login'));
    await page
      .getByRole('status')
      .filter({ hasText: `Account ${username} created` })
      .waitFor();
    // The username is carried over from registration.
    await hasValue(page.getByLabel('Username'), username);
    await logInHere(username);
    await page.waitForURL(at('/app/links'));
    await page.getByText(`Signed in as ${username}`).waitFor();

    // Without a code the server generates one (POST /api/v1/links), and the new link is listed first.
    const code = page.getByLabel('Short code');
    expect(await code.inputValue()).toBe('');
    await page.getByLabel('Target URL').fill(at('/health'));
    const [createdResponse] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/api/v1/links') && r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Create short link' }).click(),
    ]);
    expect(createdResponse.status()).toBe(201);
    const generated = ((await createdResponse.json()) as { code: string }).code;
    expect(generated).toMatch(/^[a-zA-Z0-9]{7}$/);
    await containsText(page.locator('ul.cards').getByRole('listitem').first(), at(`/${generated}`));
    const shortCode = `e2e${String(process.pid).slice(-4)}x`;
    await code.fill(shortCode);
    await page.getByLabel('Target URL').fill(at('/health'));
    await page.getByRole('button', { name: 'Create short link' }).click();

    await containsText(linkCard(shortCode), at(`/${shortCode}`));
    await containsText(linkCard(shortCode), '0 clicks');
    await screenshot(page, 'links');

    // The same code again: the server's detail is shown.
    await code.fill(shortCode);
    await page.getByLabel('Target URL').fill(at('/health'));
    await page.getByRole('button', { name: 'Create short link' }).click();
    await hasText(page.getByRole('alert'), 'Code already exists');

    await linkCard(shortCode)
      .getByRole('button', { name: `QR code for ${shortCode}` })
      .click();
    await page.getByRole('img', { name: `QR code for ${at(`/${shortCode}`)}` }).waitFor();
    await screenshot(page, 'links-qr-code');
    await page.keyboard.press('Escape');
    await isGone(page.getByRole('dialog'));

    // Following the short link counts a click, and the list shows it.
    const followed = await page.goto(at(`/${shortCode}`));
    expect(followed?.url()).toBe(at('/health'));
    await page.goto(at('/app/links'));
    await containsText(linkCard(shortCode), '1 click');

    // Edit the target and the code.
    const renamed = `${shortCode}2`;
    await linkCard(shortCode)
      .getByRole('button', { name: `Edit ${shortCode}` })
      .click();
    const editor = page.getByRole('dialog', { name: `Edit ${shortCode}` });
    await editor.getByLabel('Target URL').fill(at('/health/ready'));
    await editor.getByLabel('Short code').fill(renamed);
    await screenshot(page, 'links-edit');
    await editor.getByRole('button', { name: 'Save' }).click();
    await containsText(linkCard(renamed), at('/health/ready'));
    await containsText(linkCard(renamed), '1 click');
    await isGone(linkCard(shortCode));

    // Delete asks first; Cancel keeps the link.
    await linkCard(renamed)
      .getByRole('button', { name: `Delete ${renamed}` })
      .click();
    const confirm = page.getByRole('dialog', { name: `Delete ${renamed}?` });
    await screenshot(page, 'links-delete-confirmation');
    await confirm.getByRole('button', { name: 'Cancel' }).click();
    expect(await linkCard(renamed).count()).toBe(1);
    await linkCard(renamed)
      .getByRole('button', { name: `Delete ${renamed}` })
      .click();
    await page
      .getByRole('dialog', { name: `Delete ${renamed}?` })
      .getByRole('button', { name: 'Delete' })
      .click();
    await isGone(linkCard(renamed));
    await page
      .getByRole('status')
      .filter({ hasText: `Deleted ${renamed}` })
      .waitFor();
    expect((await fetch(at(`/${renamed}`), { redirect: 'manual' })).status).toBe(404);
  });

  it('registration shows the server’s texts for a taken username and a taken email', async () => {
    const username = newUsername('taken');
    await register(username);
    await page.waitForURL(at('/app/login'));
    await register(username);
    await hasText(page.getByRole('alert'), 'Username already registered');
    await page.getByLabel('Username').fill(`${username}_b`);
    await page.getByRole('button', { name: 'Create account' }).click();
    await hasText(page.getByRole('alert'), 'User already exists');
    await screenshot(page, 'register-error');
  });

  it('a wrong password five times, then the lockout message', async () => {
    const username = newUsername('lock');
    await register(username);
    await page.waitForURL(at('/app/login'));
    for (let attempt = 1; attempt <= 5; attempt++) {
      expect(await logInHere(username, `wrong-password-${attempt}`)).toBe(401);
      await hasText(page.getByRole('alert'), 'Invalid username or password');
    }
    expect(await logInHere(username)).toBe(423);
    await hasText(page.getByRole('alert'), LOCKED);
    expect(page.url()).toBe(at('/app/login'));
    await screenshot(page, 'login-locked');
  });

  it('an expired session sends the user to log in, then back where they were', async () => {
    const username = await signUpAndLogIn('expiry');
    await page.goto(at('/app/executions'));
    await hasText(page.getByRole('heading', { level: 1 }), 'Executions');
    // Submitting shows the run's live status.
    const [queued] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/execute') && r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Run' }).click(),
    ]);
    expect(queued.status()).toBe(202);
    await page.locator('[data-status]').first().waitFor();
    const { execution_id: id } = (await queued.json()) as { execution_id: string };
    // The history names the run by its time, not by its UUID (issue 16); the id stays in its title.
    const history = page.getByRole('region', { name: 'Recent executions' });
    const run = history.locator(`button[title="${id}"]`);
    await containsText(run, 'Run of ');
    expect(await run.innerText()).toMatch(/^Run of \S/);
    await lacksText(history, id);
    await screenshot(page, 'executions');

    // The session ends on the server's side: the browser no longer has a valid access token.
    const cookies = await context.cookies(e2e.server.url);
    expect(cookies.map((c) => c.name).sort()).toEqual(['access_token', 'csrf_token']);
    await context.clearCookies({ name: 'access_token' });

    await page.goto(at('/app/links?after=0'));
    await page.waitForURL(at(`/app/login?next=${encodeURIComponent('/app/links?after=0')}`));
    await page.getByText('Log in to go on to your links.').waitFor();
    await screenshot(page, 'login-session-expired');
    await logInHere(username);
    await page.waitForURL(at('/app/links?after=0'));
    await hasText(page.getByRole('heading', { level: 1 }), 'Links');
  });

  it('loading a page logs no error in the console, and the icon is served (never a short code)', async () => {
    await signUpAndLogIn('console');
    const errors: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') errors.push(message.text());
    });
    page.on('pageerror', (error) => errors.push(error.message));
    const failed: string[] = [];
    page.on('response', (response) => {
      if (response.status() >= 400) failed.push(`${response.status()} ${response.url()}`);
    });
    for (const path of ['/app/links', '/app/executions', '/app/channels']) {
      await page.goto(at(path));
      await page.getByRole('heading', { level: 1 }).waitFor();
      await page.waitForLoadState('networkidle');
    }
    const href = await page.locator('link[rel="icon"]').evaluate((link) => (link as unknown as { href: string }).href);
    const icon = await page.evaluate(async (url) => {
      const response = await fetch(url);
      return { href: url, status: response.status, type: response.headers.get('content-type') };
    }, href);
    expect(icon).toEqual({ href: at('/favicon.ico'), status: 200, type: 'image/x-icon' });
    expect(failed).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('pages whose API is not there yet say so; admin pages are for admins only', async () => {
    await signUpAndLogIn('pages');
    await page.getByRole('link', { name: 'Channels' }).click();
    await hasText(page.getByRole('heading', { level: 1 }), 'Notification channels');
    await lacksText(page.locator('main'), 'Loading…');
    await screenshot(page, 'channels');
    await page.goto(at('/app/admin/settings'));
    await hasText(page.getByRole('heading', { level: 1 }), 'Administrators only');
    await isGone(page.getByRole('link', { name: 'Settings' }));
  });

  it('works on a phone-sized screen (375 px) without sideways scrolling', async () => {
    await context.close();
    context = await e2e.browser.newContext({ viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
    page = await context.newPage();
    const code = `ph${String(process.pid).slice(-4)}abcd`;
    await signUpAndLogIn('phone');
    await page.getByLabel('Target URL').fill(at('/health'));
    await page.getByLabel('Short code').fill(code);
    await page.getByRole('button', { name: 'Create short link' }).click();
    await linkCard(code).waitFor();
    // A string, not a function: this file is type-checked without the DOM library.
    const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
    expect(overflow).toBeLessThanOrEqual(0);
    await screenshot(page, 'links-phone');
  });

  it('my links, all links for an admin, search and sort, on the desktop and 390 px wide', async () => {
    const tag = String(process.pid).slice(-4);
    const owner = await signUpAndLogIn('mine');
    const create = async (shortCode: string, target: string) => {
      await page.getByLabel('Target URL').fill(target);
      await page.getByLabel('Short code').fill(shortCode);
      await page.getByRole('button', { name: 'Create short link' }).click();
      await linkCard(shortCode).waitFor();
    };
    await create(`my${tag}aa`, at(`/health?${owner}=first`));
    await create(`my${tag}bb`, at(`/health?${owner}=second`));
    await hasText(page.getByRole('heading', { name: 'My links' }), 'My links');
    // Newest first by default; the other user's links are not listed.
    await containsText(page.locator('ul.cards').getByRole('listitem').first(), `my${tag}bb`);
    await isGone(page.getByRole('button', { name: 'All links' }));

    // Search by a piece of the URL, then sort oldest first.
    await page.getByLabel('Search links').fill(`${owner}=first`);
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await isGone(linkCard(`my${tag}bb`));
    await linkCard(`my${tag}aa`).waitFor();
    await page.getByRole('button', { name: 'Clear' }).click();
    await linkCard(`my${tag}bb`).waitFor();
    await page.getByLabel('Sort').selectOption('created_at');
    await containsText(page.locator('ul.cards').getByRole('listitem').first(), `my${tag}aa`);
    await screenshot(page, 'links-search-sort');

    // At 390 px wide everything fits without sideways scrolling.
    await page.setViewportSize({ width: 390, height: 780 });
    const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
    expect(overflow).toBeLessThanOrEqual(0);
    await screenshot(page, 'links-search-phone');

    // An administrator sees only their own links at first, everyone's under "All links".
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(at('/app/login'));
    await logInHere(ADMIN.username, ADMIN.password);
    await page.waitForURL(at('/app/links'));
    await isGone(linkCard(`my${tag}aa`));
    await page.getByRole('button', { name: 'All links' }).click();
    await hasText(page.getByRole('heading', { level: 2, name: 'All links' }), 'All links');
    await page.getByLabel('Search links').fill(`my${tag}`);
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await linkCard(`my${tag}aa`).waitFor();
    await linkCard(`my${tag}bb`).waitFor();
    const wide = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
    expect(wide).toBeLessThanOrEqual(0);
    await screenshot(page, 'links-all-admin-phone');
  });

  it('an admin changes password_min_length and registration follows it', async () => {
    await page.goto(at('/app/admin/settings'));
    await page.waitForURL(/\/app\/login\?next=/);
    await logInHere(ADMIN.username, ADMIN.password);
    await page.waitForURL(at('/app/admin/settings'));
    const minLength = page.getByLabel('Password min length');
    await hasValue(minLength, '8');
    await minLength.fill('12');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByRole('status').filter({ hasText: 'Settings saved' }).waitFor();
    await screenshot(page, 'admin-settings');

    await page.getByRole('link', { name: 'Dead letters' }).click();
    await hasText(page.getByRole('heading', { level: 1 }), 'Dead letters');
    await lacksText(page.locator('main'), 'Loading…');
    await screenshot(page, 'admin-dead-letters');

    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(at('/app/login'));
    const username = newUsername('minlen');
    await register(username, 'elevenchars');
    await hasText(page.getByRole('alert'), 'Password must be at least 12 characters');
    await page.getByLabel('Password').fill('twelve-chars');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(at('/app/login'));
    await logInHere(username, 'twelve-chars');
    await page.waitForURL(at('/app/links'));
  });

  it('an admin sees when a dead letter waiting for its retry goes out, and discards it first', async () => {
    // A letter as the dead-letter manager leaves one it will re-publish in an hour.
    const eventId = randomUUID();
    const recordedAt = Date.now();
    const sqlite = new Database(e2e.databaseFile);
    sqlite.pragma('busy_timeout = 5000');
    sqlite
      .prepare(
        `INSERT INTO dead_letters (dlq_event_id, event_id, event_type, topic, partition_no, group_name, headers,
           envelope, error, attempts, status, created_at, updated_at, retry_at)
         VALUES (?, ?, 'url.created', 'url_events', 0, 'notifier', ?, ?, 'Error: refused', 5, 'retrying', ?, ?, ?)`,
      )
      .run(
        randomUUID(),
        eventId,
        JSON.stringify({ event_type: 'url.created', service: 'urlshortener' }),
        JSON.stringify({
          event_id: eventId,
          event_type: 'url.created',
          event_version: 1,
          occurred_at: new Date(recordedAt).toISOString(),
          service: 'urlshortener',
          payload: { code: 'dlqe2e1' },
        }),
        recordedAt,
        recordedAt,
        recordedAt + 3_600_000,
      );
    sqlite.close();

    await page.goto(at('/app/admin/dead-letters'));
    await page.waitForURL(/\/app\/login\?next=/);
    await logInHere(ADMIN.username, ADMIN.password);
    await page.waitForURL(at('/app/admin/dead-letters'));
    await page.getByLabel('Status').selectOption('retrying');
    const card = page.getByRole('listitem').filter({ hasText: 'Being retried' }).filter({ hasText: 'notifier' });
    await containsText(card, 'Sent again at');
    await containsText(card, 'unless you decide first');
    await screenshot(page, 'admin-dead-letter-retrying');

    await card.getByRole('button', { name: 'Discard' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Discard' }).click();
    await isGone(page.getByRole('dialog'));
    await page.getByRole('status').filter({ hasText: 'Discarded: url.created' }).waitFor();
    await isGone(card);
    await page.getByLabel('Status').selectOption('discarded');
    await containsText(page.getByRole('listitem').filter({ hasText: 'notifier' }), 'Discarded');
  });
});
