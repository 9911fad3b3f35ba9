import type { BrowserContext } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import {
  chromiumAvailable,
  containsText,
  hasText,
  noSidewaysScroll,
  openAs as openPageAs,
  registerUser,
  SCREENS,
  screenshot,
  useServerAndChromium,
} from './browser.js';

/**
 * The API keys page and the administrators' users page (issue 14 item 8) in Debian's headless
 * Chromium against the built server, on a desktop screen and on a 390 px wide phone.
 */
const available = chromiumAvailable();
const ADMIN = { username: 'keys_root', email: 'keys_root@example.com', password: 'admin-password-1' };
const PASSWORD = 'correct-horse-9';

describe.skipIf(!available)('API keys and users pages in Chromium', () => {
  const e2e = useServerAndChromium('keys', ADMIN);
  let userCount = 0;
  const newUsername = (prefix: string) => `${prefix}_${process.pid}_${++userCount}`;
  const at = (path: string) => `${e2e.server.url}${path}`;

  /** A user registered through the API. */
  async function registered(prefix: string): Promise<string> {
    const username = newUsername(prefix);
    await registerUser(e2e.server.url, username, PASSWORD);
    return username;
  }

  const loginStatus = async (username: string, password: string) =>
    (
      await fetch(at('/api/v1/auth/login'), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username, password }),
      })
    ).status;

  const meWithKey = async (key: string) =>
    (await fetch(at('/api/v1/auth/me'), { headers: { authorization: `Bearer ${key}` } })).status;

  const openAs = (context: BrowserContext, path: string, username: string, password = PASSWORD) =>
    openPageAs(context, e2e.server.url, path, username, password);

  for (const screen of SCREENS) {
    it(`${screen.name}: create a key, see it once, copy it, use it, revoke it`, async () => {
      const context = await e2e.browser.newContext(screen.options);
      context.setDefaultTimeout(10_000);
      await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: e2e.server.url });
      try {
        const username = await registered('keys');
        const page = await openAs(context, '/app/api-keys', username);
        await hasText(page.getByRole('heading', { level: 1 }), 'API keys');
        await page.getByLabel('Name', { exact: true }).fill('deploy script');
        await page.getByRole('button', { name: 'Create key' }).click();
        const shown = page.getByTestId('new-api-key');
        await shown.waitFor();
        const key = (await shown.textContent())!.trim();
        expect(key).toMatch(/^us_[A-Za-z0-9_-]{43}$/);
        await page.getByRole('button', { name: 'Copy key' }).click();
        await page.getByText(/^(Copied\.|Copying is blocked here)/).waitFor();
        await noSidewaysScroll(page);
        await screenshot(page, `api-keys-${screen.name}`);
        expect(await meWithKey(key)).toBe(200);

        // Once kept, the key is gone from the page for good; the list shows only its prefix.
        await page.getByRole('button', { name: 'I have kept it' }).click();
        await page.reload();
        const card = page.getByRole('listitem').filter({ hasText: 'deploy script' });
        await containsText(card, `${key.slice(0, 11)}…`);
        expect(await page.locator('main').textContent()).not.toContain(key);

        await page.getByRole('button', { name: 'Revoke key deploy script' }).click();
        await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
        await page.getByRole('status').filter({ hasText: 'Revoked deploy script' }).waitFor();
        await containsText(card, 'revoked');
        expect(await meWithKey(key)).toBe(401);
      } finally {
        await context.close();
      }
    });

    it(`${screen.name}: an admin searches users, disables and enables one, makes one admin, unlocks one`, async () => {
      const context = await e2e.browser.newContext(screen.options);
      context.setDefaultTimeout(10_000);
      try {
        const target = await registered('target');
        for (let i = 0; i < 5; i++) expect(await loginStatus(target, 'wrong password!')).toBe(401);
        expect(await loginStatus(target, PASSWORD)).toBe(423);

        const page = await openAs(context, '/app/admin/users', ADMIN.username, ADMIN.password);
        await hasText(page.getByRole('heading', { level: 1 }), 'Users');
        await page.getByLabel('Search').fill(target);
        await page.getByRole('button', { name: 'Search' }).click();
        const card = page.getByTestId(`user-${target}`);
        await containsText(card, 'locked');
        // The target is already on the unfiltered first page, so its card alone does not show the
        // search has answered: wait until the list holds that one user only.
        await eventually(async () => expect(await page.locator('main').getByRole('listitem').count()).toBe(1));
        await noSidewaysScroll(page);
        await screenshot(page, `admin-users-${screen.name}`);

        await page.getByRole('button', { name: `Unlock ${target}` }).click();
        await page
          .getByRole('status')
          .filter({ hasText: `Unlocked ${target}` })
          .waitFor();
        expect(await loginStatus(target, PASSWORD)).toBe(200);

        await page.getByRole('button', { name: `Disable ${target}` }).click();
        await page.getByRole('dialog').getByRole('button', { name: 'Disable' }).click();
        await page
          .getByRole('status')
          .filter({ hasText: `Disabled ${target}` })
          .waitFor();
        await containsText(card, 'disabled');
        expect(await loginStatus(target, PASSWORD)).toBe(403);
        await page.getByRole('button', { name: `Enable ${target}` }).click();
        await page
          .getByRole('status')
          .filter({ hasText: `Enabled ${target}` })
          .waitFor();
        expect(await loginStatus(target, PASSWORD)).toBe(200);

        await page.getByLabel(`Role of ${target}`).selectOption('admin');
        await page
          .getByRole('status')
          .filter({ hasText: `${target} is now admin` })
          .waitFor();
        await page.getByLabel(`Role of ${target}`).selectOption('user');
        await page
          .getByRole('status')
          .filter({ hasText: `${target} is now user` })
          .waitFor();

        // The last administrator: the server's refusal is shown.
        await page.getByLabel('Search').fill(ADMIN.username);
        await page.getByRole('button', { name: 'Search' }).click();
        await page.getByTestId(`user-${ADMIN.username}`).waitFor();
        await page.getByLabel(`Role of ${ADMIN.username}`).selectOption('user');
        await hasText(page.getByRole('alert'), 'Cannot remove the last administrator');
      } finally {
        await context.close();
      }
    });
  }
});
