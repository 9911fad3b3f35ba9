import { readFileSync } from 'node:fs';
import type { BrowserContext, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import {
  chromiumAvailable,
  containsText,
  hasText,
  hasValue,
  isGone,
  noSidewaysScroll,
  openAs,
  registerUser,
  SCREENS,
  screenshot,
  useServerAndChromium,
} from './browser.js';

/**
 * The web client of issue 15 (item 5) in Debian's headless Chromium against the built server, on a
 * desktop screen and on a 390 px wide phone: a link's statistics page drawn from real visits, expiry
 * and max visits in the link forms and cards, import with its per-row report, and export.
 */
const available = chromiumAvailable();
const ADMIN = { username: 'stats_root', email: 'stats_root@example.com', password: 'admin-password-1' };
const PASSWORD = 'correct-horse-9';

const UA = {
  chromeWindows:
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
  safariIphone:
    'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1',
  firefoxLinux: 'Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0',
  googlebot: 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
};

describe.skipIf(!available)('link statistics, lifecycle, import and export in Chromium', () => {
  // Countries come from the header a trusted proxy would set (the service's VISIT_COUNTRY_HEADER).
  const e2e = useServerAndChromium('analytics', ADMIN, { VISIT_COUNTRY_HEADER: 'cf-ipcountry' });
  let count = 0;
  const tag = () => `${String(process.pid).slice(-4)}${++count}`;
  const at = (path: string) => `${e2e.server.url}${path}`;

  async function signedIn(screen: (typeof SCREENS)[number], path = '/app/links') {
    const context = await e2e.browser.newContext({ ...screen.options, acceptDownloads: true });
    context.setDefaultTimeout(10_000);
    const username = `an_${tag()}`;
    await registerUser(e2e.server.url, username, PASSWORD);
    const page = await openAs(context, e2e.server.url, path, username, PASSWORD);
    return { context, page, username };
  }

  const linkCard = (page: Page, code: string) => page.getByRole('listitem', { name: `Link ${code}`, exact: true });

  /** Creates a link on the links page shown, with the optional fields given. */
  async function createLink(page: Page, code: string, options: { expires?: string; maxVisits?: number } = {}) {
    await page.getByLabel('Target URL').fill(at('/health'));
    await page.getByLabel('Short code (optional)').fill(code);
    if (options.expires) await page.getByLabel('Expires at (optional)').fill(options.expires);
    if (options.maxVisits) await page.getByLabel('Max visits (optional)').fill(String(options.maxVisits));
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/api/v1/links') && r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Create short link' }).click(),
    ]);
    expect(response.status()).toBe(201);
    await linkCard(page, code).waitFor();
    return (await response.json()) as { code: string; expires_at?: string; max_visits?: number };
  }

  /** Follows a short link as a visitor would, without following the redirect. */
  const follow = (code: string, headers: Record<string, string> = {}) =>
    fetch(at(`/${code}`), { redirect: 'manual', headers });

  /** How many pixels of each chart's canvas are drawn (not transparent). */
  const drawnPixels = (page: Page) =>
    page.evaluate<number[]>(
      `[...document.querySelectorAll('.chart canvas')].map((canvas) => {
        const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        let drawn = 0;
        for (let i = 3; i < data.length; i += 4) if (data[i] !== 0) drawn++;
        return drawn;
      })`,
    );

  const tableOf = (page: Page, heading: string) => page.getByRole('region', { name: heading }).getByRole('table');

  async function downloaded(page: Page, click: () => Promise<void>): Promise<{ name: string; text: string }> {
    const [download] = await Promise.all([page.waitForEvent('download'), click()]);
    const path = await download.path();
    return { name: download.suggestedFilename(), text: readFileSync(path, 'utf8') };
  }

  for (const screen of SCREENS) {
    it(`${screen.name}: a link's statistics from real visits: the charts drawn, another range, the visits as CSV`, async () => {
      const { context, page } = await signedIn(screen);
      try {
        const code = `st${tag()}`;
        await createLink(page, code);

        // Seven visits: four people from a news site and a social site in two countries, one direct,
        // one search-engine bot.
        const visits: Array<Record<string, string>> = [
          { 'user-agent': UA.chromeWindows, referer: 'https://news.example.com/story/1', 'cf-ipcountry': 'DE' },
          { 'user-agent': UA.chromeWindows, referer: 'https://news.example.com/story/2', 'cf-ipcountry': 'DE' },
          { 'user-agent': UA.chromeWindows, referer: 'https://news.example.com/', 'cf-ipcountry': 'DE' },
          { 'user-agent': UA.safariIphone, referer: 'https://social.example.org/post', 'cf-ipcountry': 'US' },
          { 'user-agent': UA.safariIphone, referer: 'https://social.example.org/post', 'cf-ipcountry': 'US' },
          { 'user-agent': UA.firefoxLinux },
          { 'user-agent': UA.googlebot, 'cf-ipcountry': 'US' },
        ];
        for (const headers of visits) expect((await follow(code, headers)).status).toBe(302);

        await page.reload();
        await linkCard(page, code)
          .getByRole('link', { name: `Statistics for ${code}` })
          .click();
        await page.waitForURL(at(`/app/links/${code}/stats`));
        await hasText(page.getByRole('heading', { level: 1 }), `Statistics for ${code}`);
        // Visits are journaled with the click flush and merged into statistics every few seconds: refresh until all seven are in.
        await eventually(
          async () => {
            await page.getByRole('button', { name: 'Refresh' }).click();
            expect((await page.locator('[data-total="visits"]').innerText({ timeout: 1000 })).trim()).toBe('7');
          },
          { timeoutMs: 15_000, intervalMs: 200 },
        );
        await hasText(page.locator('[data-total="bot-share"]'), '14.3%');
        await hasText(page.locator('[data-total="bots"]'), '1 of 7 visits');
        await hasText(page.locator('[data-total="humans"]'), '6');
        await page.getByRole('button', { name: '30 days' }).and(page.locator('[aria-pressed="true"]')).waitFor();
        await hasValue(page.getByLabel('Per', { exact: true }), 'day');

        // The charts are drawn: a line over time and five bar charts, each canvas with pixels on it.
        await page.getByRole('img', { name: /^Visits per day: 7 in all/ }).waitFor();
        await page.getByRole('img', { name: /^Referrers: news\.example\.com 3, / }).waitFor();
        await eventually(async () => {
          const drawn = await drawnPixels(page);
          expect(drawn).toHaveLength(6);
          for (const pixels of drawn) expect(pixels).toBeGreaterThan(0);
        });
        // The numbers behind the charts, as tables for those who cannot see them.
        const referrers = tableOf(page, 'Referrers');
        await page.getByRole('region', { name: 'Referrers' }).getByText('Show as a table').click();
        await containsText(referrers, 'news.example.com\t3');
        await containsText(referrers, 'social.example.org\t2');
        await containsText(referrers, 'Direct or unknown\t2');
        await page.getByRole('region', { name: 'Countries' }).getByText('Show as a table').click();
        await containsText(tableOf(page, 'Countries'), 'United States (US)\t3');
        await containsText(tableOf(page, 'Countries'), 'Germany (DE)\t3');
        await containsText(tableOf(page, 'Countries'), 'Unknown\t1');
        await page.getByRole('region', { name: 'Devices' }).getByText('Show as a table').click();
        await containsText(tableOf(page, 'Devices'), 'Desktop');
        await noSidewaysScroll(page);
        await screenshot(page, `stats-${screen.name}`);

        // Another range: the last 24 hours per hour, kept in the address (back and reload keep it).
        await page.getByRole('button', { name: '24 hours' }).click();
        await page.waitForURL(/\?range=24h&interval=hour$/);
        await hasValue(page.getByLabel('Per', { exact: true }), 'hour');
        await page.getByRole('img', { name: /^Visits per hour: 7 in all/ }).waitFor();
        await page.reload();
        await hasText(page.locator('[data-total="visits"]'), '7');
        await hasValue(page.getByLabel('Per', { exact: true }), 'hour');

        // A custom range of the days before today has none of the visits.
        await page.getByRole('button', { name: 'Custom' }).click();
        const today = new Date();
        const day = (daysAgo: number) => new Date(today.getTime() - daysAgo * 86_400_000).toISOString().slice(0, 10);
        await page.getByLabel('From', { exact: true }).fill(day(10));
        await page.getByLabel('To', { exact: true }).fill(day(1));
        await screenshot(page, `stats-custom-range-${screen.name}`);
        await page.getByRole('button', { name: 'Show this range' }).click();
        await page.waitForURL(new RegExp(`\\?from=${day(10)}&to=${day(1)}&interval=day$`));
        await hasText(page.locator('[data-total="visits"]'), '0');
        await hasText(page.locator('[data-total="bot-share"]'), '–');
        await containsText(page.getByRole('region', { name: 'Referrers' }), 'No visits in this range.');
        // The To date before the From date is said, and nothing changes.
        await page.getByRole('button', { name: 'Custom' }).click();
        await page.getByLabel('From', { exact: true }).fill(day(1));
        await page.getByLabel('To', { exact: true }).fill(day(3));
        await page.getByRole('button', { name: 'Show this range' }).click();
        await hasText(page.getByRole('alert'), 'The To date is before the From date.');
        await page.getByRole('button', { name: 'Cancel' }).click();
        // Back to the 24 hours, then per day through the interval picker.
        await page.goBack();
        await hasText(page.locator('[data-total="visits"]'), '7');
        await page.getByLabel('Per', { exact: true }).selectOption('day');
        await page.waitForURL(/\?range=24h&interval=day$/);
        await page.getByRole('img', { name: /^Visits per day: 7 in all/ }).waitFor();

        // The visits of the range as CSV: a header and one line per visit, no address of anyone.
        const csv = await downloaded(page, () => page.getByRole('button', { name: 'Download visits (CSV)' }).click());
        expect(csv.name).toMatch(new RegExp(`^${code}-visits-.*\\.csv$`));
        const lines = csv.text.trim().split(/\r?\n/);
        expect(lines[0]).toBe('visited_at,referrer_host,browser,os,device,bot,country');
        expect(lines).toHaveLength(8);
        expect(lines.filter((line) => line.includes(',news.example.com,'))).toHaveLength(3);
        expect(lines.filter((line) => line.includes(',true,'))).toHaveLength(1);
        expect(csv.text).not.toContain('127.0.0.1');
        await page
          .getByRole('status')
          .filter({ hasText: `Downloaded ${csv.name}` })
          .waitFor();
        await noSidewaysScroll(page);

        // By keyboard alone: a preset is a button that Enter presses; the table opens with Enter too.
        await page.getByRole('button', { name: '90 days' }).focus();
        await page.keyboard.press('Enter');
        await page.waitForURL(/\?range=90d&interval=day$/);
        await page.getByRole('img', { name: /^Visits per day: 7 in all/ }).waitFor();
        await page.getByRole('region', { name: 'Visits over time' }).getByText('Show as a table').focus();
        await page.keyboard.press('Enter');
        // One row a UTC day the 90 days touch (90, or 91 unless they start at midnight). Polled: the
        // 24 hours per day read "Visits per day: 7 in all" too, so the chart's name does not say
        // the 90 days' series has arrived, and the table may show the last range's row or two first.
        const rows = tableOf(page, 'Visits over time').locator('tbody tr');
        await expect.poll(() => rows.count(), { timeout: 10_000 }).toSatisfy((days) => days === 90 || days === 91);

        // Back to the links: the page asks for no more statistics on its way out.
        const strays: string[] = [];
        page.on('request', (request) => {
          if (request.url().includes('/stats')) strays.push(request.url());
        });
        await page.getByRole('link', { name: 'Back to links' }).click();
        await page.waitForURL(at('/app/links'));
        await linkCard(page, code).waitFor();
        expect(strays).toEqual([]);
      } finally {
        await context.close();
      }
    });

    it(`${screen.name}: expiry and max visits on create and edit, shown on the cards, 410 past them`, async () => {
      const { context, page } = await signedIn(screen);
      try {
        // A link of two visits, expiring in a week.
        const limited = `lm${tag()}`;
        const nextWeek = new Date(Date.now() + 7 * 86_400_000);
        const local = (d: Date) =>
          `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}T${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}`;
        const created = await createLink(page, limited, { expires: local(nextWeek), maxVisits: 2 });
        expect(created.max_visits).toBe(2);
        expect(new Date(created.expires_at!).getTime()).toBe(new Date(local(nextWeek)).getTime());
        await containsText(linkCard(page, limited), '2 visits left');
        await containsText(linkCard(page, limited), 'Expires');
        // The form is empty again for the next link.
        await hasValue(page.getByLabel('Max visits (optional)'), '');
        await hasValue(page.getByLabel('Expires at (optional)'), '');
        await noSidewaysScroll(page);
        await screenshot(page, `links-lifecycle-${screen.name}`);

        expect((await follow(limited)).status).toBe(302);
        expect((await follow(limited)).status).toBe(302);
        const gone = await follow(limited);
        expect(gone.status).toBe(410);
        expect(await gone.json()).toEqual({ detail: 'This link has reached its limit of 2 visits.' });
        await eventually(
          async () => {
            await page.getByRole('button', { name: 'Refresh' }).click();
            expect(await linkCard(page, limited).innerText({ timeout: 1000 })).toContain('Limit reached');
          },
          { timeoutMs: 15_000, intervalMs: 200 },
        );
        expect(await linkCard(page, limited).getAttribute('data-state')).toBe('limit-reached');

        // Editing clears the limit (an emptied field), and the link answers again.
        await linkCard(page, limited)
          .getByRole('button', { name: `Edit ${limited}` })
          .click();
        const editor = page.getByRole('dialog', { name: `Edit ${limited}` });
        await hasValue(editor.getByLabel('Max visits'), '2');
        await hasValue(editor.getByLabel('Expires at'), local(nextWeek));
        await editor.getByLabel('Max visits').fill('');
        await screenshot(page, `links-lifecycle-edit-${screen.name}`);
        await editor.getByRole('button', { name: 'Save' }).click();
        await isGone(editor);
        await containsText(linkCard(page, limited), 'Expires');
        await isGone(linkCard(page, limited).getByText('Limit reached'));
        expect((await follow(limited)).status).toBe(302);

        // An expiry moved into the past: the link has expired, says so, and answers 410.
        await linkCard(page, limited)
          .getByRole('button', { name: `Edit ${limited}` })
          .click();
        const past = new Date(Date.now() - 60 * 60_000);
        await editor.getByLabel('Expires at').fill(local(past));
        await editor.getByRole('button', { name: 'Save' }).click();
        await isGone(editor);
        await containsText(linkCard(page, limited), 'Expired');
        expect(await linkCard(page, limited).getAttribute('data-state')).toBe('expired');
        const expired = await follow(limited);
        expect(expired.status).toBe(410);
        expect(((await expired.json()) as { detail: string }).detail).toMatch(/^This link expired at /);
        await noSidewaysScroll(page);
      } finally {
        await context.close();
      }
    });

    it(`${screen.name}: import a file of good, taken and bad rows with a dry run first, then export`, async () => {
      const { context, page } = await signedIn(screen);
      try {
        const taken = `tk${tag()}`;
        await createLink(page, taken);
        const good = `im${tag()}`;
        const file = [
          'code,url,created_at,click_count,expires_at,max_visits',
          `${good},https://example.com/imported,2026-01-02T03:04:05.000Z,5,,`,
          `${taken},https://example.com/again,,,,`,
          'bad code,https://example.com/bad,,,,',
          `ok${tag()},not a url,,,,`,
        ].join('\n');

        await page.getByRole('button', { name: 'Import…' }).click();
        const dialog = page.getByRole('dialog', { name: 'Import links' });
        await dialog.getByLabel('CSV or JSON file').setInputFiles({
          name: 'links.csv',
          mimeType: 'text/csv',
          buffer: Buffer.from(`${file}\n`),
        });
        expect(await dialog.getByLabel('Check only (dry run): nothing is created').isChecked()).toBe(true);
        await dialog.getByRole('button', { name: 'Check file' }).click();
        await hasText(
          dialog.getByRole('status'),
          'Checked 4 rows, nothing imported: 1 would be created, 1 already taken, 2 refused.',
        );
        await hasText(dialog.locator('[data-count="rows"]'), '4');
        await hasText(dialog.locator('[data-count="created"]'), '1');
        await hasText(dialog.locator('[data-count="taken"]'), '1');
        await hasText(dialog.locator('[data-count="refused"]'), '2');
        // Only the problems are listed at first, each with the server's reason.
        const rows = dialog.getByRole('table').locator('tbody tr');
        expect(await rows.count()).toBe(3);
        await containsText(rows.nth(0), `2\t${taken}\tAlready taken`);
        await containsText(rows.nth(1), '3\tbad code\tRefused');
        await containsText(rows.nth(2), '4\t');
        for (const i of [1, 2]) expect((await rows.nth(i).locator('.why').innerText()).length).toBeGreaterThan(5);
        await noSidewaysScroll(page);
        await rows.nth(2).scrollIntoViewIfNeeded();
        await screenshot(page, `links-import-report-${screen.name}`);
        // Nothing was created by the check.
        expect((await follow(good)).status).toBe(404);

        await dialog.getByRole('button', { name: 'Import the 1 new link now' }).click();
        await hasText(dialog.getByRole('status'), 'Imported 4 rows: 1 created, 1 already taken, 2 refused.');
        await dialog.getByLabel('Show only the rows with problems').uncheck();
        expect(await rows.count()).toBe(4);
        await containsText(rows.nth(0), `1\t${good}\tCreated`);
        await dialog.getByRole('button', { name: 'Close' }).click();
        await isGone(dialog);
        await containsText(linkCard(page, good), '5 clicks');
        expect((await follow(good)).headers.get('location')).toBe('https://example.com/imported');

        // Export: the user's links, as CSV and as JSON, with the lifecycle columns.
        const csv = await downloaded(page, () => page.getByRole('button', { name: 'Export CSV' }).click());
        expect(csv.name).toMatch(/\.csv$/);
        const lines = csv.text.trim().split(/\r?\n/);
        expect(lines[0]).toBe('code,url,created_at,click_count,expires_at,max_visits');
        expect(
          lines
            .slice(1)
            .map((line) => line.split(',')[0])
            .sort(),
        ).toEqual([good, taken].sort());
        const json = await downloaded(page, () => page.getByRole('button', { name: 'Export JSON' }).click());
        expect(json.name).toMatch(/\.json$/);
        const exported = JSON.parse(json.text) as Array<Record<string, unknown>>;
        // Its five imported clicks and the one followed above.
        const imported = exported.find((link) => link.code === good);
        expect(imported).toMatchObject({
          url: 'https://example.com/imported',
          click_count: 6,
          expires_at: null,
          max_visits: null,
        });
        expect(new Date(imported!.created_at as string).toISOString()).toBe('2026-01-02T03:04:05.000Z');
        await page
          .getByRole('status')
          .filter({ hasText: `Exported your links to ${json.name}` })
          .waitFor();
      } finally {
        await context.close();
      }
    });
  }

  it('the statistics page of a code that is no link says so; an anonymous visitor logs in first, then comes back to it', async () => {
    const context: BrowserContext = await e2e.browser.newContext(SCREENS[0].options);
    context.setDefaultTimeout(10_000);
    try {
      const page = await context.newPage();
      await page.goto(at('/app/links/nosuch1/stats?range=7d'));
      await page.waitForURL(at(`/app/login?next=${encodeURIComponent('/app/links/nosuch1/stats?range=7d')}`));
      await containsText(page.locator('main'), 'the statistics of nosuch1');
      await context.close();
      const { context: signed, page: mine } = await signedIn(SCREENS[0], '/app/links/nosuch1/stats?range=7d');
      try {
        await hasText(mine.getByRole('heading', { level: 1 }), 'Statistics for nosuch1');
        await mine.getByRole('alert').waitFor();
        expect(await mine.title()).toBe('Statistics for nosuch1 · UrlShortener');
      } finally {
        await signed.close();
      }
    } finally {
      await context.close();
    }
  });
});
