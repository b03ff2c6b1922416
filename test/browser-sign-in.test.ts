/**
 * Signing in during an authorization, in a real browser: the login form's post leads (through
 * svc's interaction) to the app's redirect URI on another origin, which the pages' CSP
 * `form-action 'self'` would block if it were the end of the form post's redirect chain.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as oidc from 'openid-client';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consentInBrowser, launchChromium } from './helpers/consent.js';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { Api } from './helpers/http.js';
import { approvedScope, oidcConfig, registerClient } from './helpers/oauth.js';

describe('signing in during an authorization in Chromium', () => {
  let d: TestDaemon;
  let browser: Browser;
  let app: http.Server;
  let redirectUri: string;

  beforeAll(async () => {
    [d, browser] = await Promise.all([startTestDaemon({ config: { rateLimitClient: 0, rateLimitAddress: 0 } }), launchChromium()]);
    app = http.createServer((_req, res) => res.writeHead(200, { 'Content-Type': 'text/plain', Connection: 'close' }).end('back in the app'));
    await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
    redirectUri = `http://127.0.0.1:${(app.address() as AddressInfo).port}/callback`;
  });

  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    app?.closeAllConnections();
    await new Promise((r) => app?.close(r));
  });

  it("svc's own flow (scope_access_request, already approved): log in on the form, end at the app with a code", async () => {
    const admin = await new Api(d.url).login('admin', d.adminPassword);
    const { clientId } = await registerClient(admin, { public: true, redirect_uris: [redirectUri] });
    const { scope } = await approvedScope(d, admin, clientId);
    const config = await oidcConfig(d, clientId);
    const verifier = oidc.randomPKCECodeVerifier();
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope,
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state: 'st',
    });
    // The same person who approved signs in; no review page is needed, so the login leads straight to the app.
    const r = await consentInBrowser(browser, new URL(d.url).origin, url.href, { username: 'admin', password: d.adminPassword, decision: 'approve' });
    const back = new URL(r.finalUrl);
    expect(back.origin + back.pathname).toBe(redirectUri);
    expect(back.searchParams.get('error')).toBeNull();
    const tokens = await oidc.authorizationCodeGrant(config, back, { pkceCodeVerifier: verifier, expectedState: 'st' });
    expect(tokens.access_token).toBeTruthy();
  });
});
