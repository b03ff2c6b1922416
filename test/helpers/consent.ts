/**
 * The person's side of a standard OAuth client's flow: Chromium (playwright-core, headless)
 * follows an authorization URL into svc, logs in on /ui/login when asked, and approves or denies
 * on the review page; and a stand-in `BROWSER` that tools "open" URLs with.
 */
import { existsSync } from 'node:fs';
import { chmod, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';

export const CHROMIUM_PATH = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find(
  (p): p is string => Boolean(p && existsSync(p)),
);

/** Headless Chromium, or an error that says why not (these tests are never skipped quietly). */
export async function launchChromium(): Promise<Browser> {
  if (!CHROMIUM_PATH) {
    throw new Error('Chromium is needed for the consent step and was not found at /usr/bin/chromium (or CHROMIUM_PATH); install it with the system-package script the README names.');
  }
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

export interface ConsentOptions {
  username: string;
  password: string;
  decision: 'approve' | 'deny';
  /** instance ids to tick on the review page instead of what it pre-ticks (all others unticked) */
  instances?: string[];
  /** a role to pick instead of the page's default */
  role?: 'scope_user_user' | 'scope_user_power_user';
  /** how long the whole walk may take */
  timeoutMs?: number;
}

export interface ConsentResult {
  /** the URL the browser ended on: the client's redirect URI with code or error */
  finalUrl: string;
  /** the review page's text as the person saw it */
  reviewText: string;
  /** the access request id from the review page URL */
  requestId: string | null;
  /** every URL the browser's main frame was on, in order */
  trail: string[];
}

async function describePage(page: Page): Promise<string> {
  const text = await page
    .locator('body')
    .innerText({ timeout: 2_000 })
    .catch(() => '(no body)');
  return `${page.url()}\n${text.replace(/\s+\n/g, '\n').slice(0, 1500)}`;
}

/**
 * Opens `url` in a fresh browser context (no svc session) and walks it as the person would:
 * the login form, then the review page's decision, until the browser leaves svc's origin
 * (the client's redirect URI). Throws with what the page showed when it gets stuck.
 */
export async function consentInBrowser(browser: Browser, svcOrigin: string, url: string, opts: ConsentOptions): Promise<ConsentResult> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const deadline = Date.now() + timeoutMs;
  const context = await browser.newContext();
  const page = await context.newPage();
  const trail: string[] = [];
  const problems: string[] = [];
  page.on('framenavigated', (f) => {
    if (f === page.mainFrame()) trail.push(f.url());
  });
  page.on('pageerror', (e) => problems.push(e.message));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(m.text());
  });
  // The client's own callback server may answer slowly or close: what matters is the URL.
  const left = (u: URL) => u.origin !== svcOrigin;
  let reviewText = '';
  let requestId: string | null = null;
  let loggedIn = false;
  let decided = false;
  try {
    await page.goto(url, { waitUntil: 'commit', timeout: timeoutMs }).catch((err) => {
      if (!left(new URL(page.url() || url))) throw err;
    });
    for (let step = 0; step < 12; step++) {
      if (Date.now() > deadline) throw new Error('consent walk timed out');
      if (left(new URL(page.url()))) return { finalUrl: page.url(), reviewText, requestId, trail };
      // A page may move on by itself (the decision's done page does): settle, then look again.
      await page.waitForLoadState('domcontentloaded', { timeout: Math.max(1, deadline - Date.now()) }).catch(() => undefined);
      const before = page.url();
      const here = new URL(before);
      if (left(here)) return { finalUrl: here.href, reviewText, requestId, trail };
      const waitAway = () =>
        page.waitForURL((u) => u.href !== before, { timeout: Math.max(1, deadline - Date.now()), waitUntil: 'commit' }).catch(async (err) => {
          if (page.isClosed()) throw new Error(`the page closed itself after ${decided ? 'the decision' : 'an action'} (trail: ${trail.join(' -> ')})`);
          throw new Error(`the browser stayed on ${before}: ${(err as Error).message}\n${await describePage(page)}`);
        });
      if (here.pathname === '/ui/login' && (await page.locator('#username').count()) > 0) {
        if (loggedIn) throw new Error(`asked to log in again:\n${await describePage(page)}`);
        loggedIn = true;
        await page.fill('#username', opts.username);
        await page.fill('#password', opts.password);
        await Promise.all([waitAway(), page.click('button[type=submit]')]);
        continue;
      }
      if ((await page.locator('#review-form').count()) > 0) {
        if (decided) throw new Error(`the review page came back after the decision:\n${await describePage(page)}`);
        decided = true;
        requestId = here.searchParams.get('id');
        reviewText = await page.locator('body').innerText();
        if (opts.instances) {
          for (const box of await page.locator('#review-form input[type=checkbox]:not([disabled])').all()) {
            const want = opts.instances.includes((await box.getAttribute('value')) ?? '');
            if ((await box.isChecked()) !== want) await box.setChecked(want);
          }
        }
        if (opts.role) await page.check(`#role-${opts.role}`);
        await Promise.all([waitAway(), page.click(opts.decision === 'approve' ? '#approve' : '#deny')]);
        continue;
      }
      // Something in between (a script or meta redirect): give it a moment to move on.
      const moved = await page
        .waitForURL((u) => u.href !== before, { timeout: Math.min(5_000, Math.max(1, deadline - Date.now())), waitUntil: 'commit' })
        .then(() => true, () => false);
      if (moved) continue;
      throw new Error(`neither the login form nor the review page${decided ? ' (after the decision)' : ''}:\n${await describePage(page)}`);
    }
    throw new Error(`too many steps: ${trail.join(' -> ')}`);
  } catch (err) {
    const e = err as Error;
    e.message += `\ntrail: ${trail.join(' -> ')}${problems.length ? `\npage errors: ${problems.join(' | ')}` : ''}`;
    throw e;
  } finally {
    await context.close().catch(() => undefined);
  }
}

/**
 * A stand-in for the desktop browser: an executable that tools start as `$BROWSER <url>` (the
 * `open` package runs xdg-open, whose generic mode runs $BROWSER when there is no desktop). It
 * only writes the URL down; the test then walks it in Chromium with consentInBrowser.
 */
export async function browserShim(dir: string) {
  const log = path.join(dir, 'opened-urls.txt');
  const script = path.join(dir, 'browser.sh');
  await writeFile(log, '');
  await writeFile(script, `#!/bin/sh\nprintf '%s\\n' "$1" >> '${log.replace(/'/g, "'\\''")}'\n`);
  await chmod(script, 0o755);
  let seen = 0;
  return {
    env: { BROWSER: script },
    /** every URL opened so far */
    async opened(): Promise<string[]> {
      return (await readFile(log, 'utf8')).split('\n').filter(Boolean);
    },
    /** the next URL the tool opens (polls the file; bounded) */
    async next(timeoutMs = 60_000, why = () => ''): Promise<string> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const urls = (await readFile(log, 'utf8')).split('\n').filter(Boolean);
        if (urls.length > seen) return urls[seen++];
        if (Date.now() > deadline) throw new Error(`no URL was opened in the browser within ${timeoutMs} ms${why() ? `\n${why()}` : ''}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
  };
}

/** Waits for a line of a child's output to match; bounded. */
export async function waitForOutput(read: () => string, pattern: RegExp, timeoutMs: number, what: string): Promise<RegExpMatchArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = read().match(pattern);
    if (m) return m;
    if (Date.now() > deadline) throw new Error(`${what}: no ${pattern} within ${timeoutMs} ms; output so far:\n${read().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
