import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDaemon, type TestDaemon } from './helpers/daemon.js';
import { needs } from './helpers/requirements.js';

type Json = Record<string, any>;

/** Every `$ref` in a document, with where it was found. */
function collectRefs(value: unknown, where = '#', out: { ref: string; where: string }[] = []): { ref: string; where: string }[] {
  if (Array.isArray(value)) value.forEach((v, i) => collectRefs(v, `${where}/${i}`, out));
  else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') out.push({ ref: v, where });
      else collectRefs(v, `${where}/${k}`, out);
    }
  }
  return out;
}

/** Resolves a local JSON pointer (`#/components/schemas/X`); undefined when it leads nowhere. */
function resolvePointer(doc: unknown, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  let node: any = doc;
  for (const raw of ref.slice(2).split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, key)) return undefined;
    node = node[key];
  }
  return node;
}

/** Where the HTML loads things from: src and href attributes, and CSS url(...) values. */
function loadedUrls(html: string): string[] {
  const attrs = [...html.matchAll(/\s(?:src|href)\s*=\s*["']([^"']*)["']/gi)].map((m) => m[1]);
  return [...attrs, ...cssUrls(html)];
}

function cssUrls(css: string): string[] {
  const urls = [...css.matchAll(/url\(\s*(['"]?)([^'")]*)\1\s*\)/gi)].map((m) => m[2]);
  const imports = [...css.matchAll(/@import\s+(['"])([^'"]+)\1/gi)].map((m) => m[2]);
  return [...urls, ...imports];
}

/** Hosts of every absolute http(s) URL in a text, leaving out XML namespace names (never fetched). */
function httpHosts(text: string): string[] {
  const withoutNamespaces = text.replace(/\sxmlns(?::\w+)?\s*=\s*["'][^"']*["']/gi, '');
  return [...withoutNamespaces.matchAll(/https?:\/\/([^/"'\s)<>]+)/gi)].map((m) => m[1].toLowerCase());
}

const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find(
  (p): p is string => Boolean(p && existsSync(p)),
);

describe('OpenAPI document and Swagger UI', () => {
  let d: TestDaemon;
  let doc: Json;
  let own: string;

  beforeAll(async () => {
    d = await startTestDaemon();
    own = new URL(d.url).host;
    const res = await fetch(`${d.url}/svc/v1/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    doc = (await res.json()) as Json;
  });
  afterAll(() => d.stop());

  it('is OpenAPI 3.1.0 with info, a server and the Error schema', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info).toMatchObject({ title: 'svc' });
    expect(typeof doc.info.version).toBe('string');
    expect(doc.servers).toEqual([{ url: d.baseUrl }]);
    expect(doc.components.schemas.Error).toBeDefined();
    expect(doc.components.securitySchemes).toHaveProperty('session');
    expect(doc.components.securitySchemes).toHaveProperty('bearer');
  });

  it('documents every route of the app with its method, path, parameters and responses', () => {
    const routes = d.app.routes;
    expect(routes.length).toBeGreaterThan(10);
    const operationIds = new Set<string>();
    for (const route of routes) {
      const op = doc.paths?.[route.path]?.[route.method];
      expect(op, `${route.method.toUpperCase()} ${route.path}`).toBeDefined();
      expect(op.operationId).toBe(route.operationId);
      expect(operationIds.has(op.operationId), `duplicate operationId ${op.operationId}`).toBe(false);
      operationIds.add(op.operationId);
      for (const status of Object.keys(route.responses)) expect(op.responses, `${route.path} ${status}`).toHaveProperty(status);
      for (const status of route.errors ?? []) {
        expect(op.responses[String(status)].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
      }
      const pathParams = [...route.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      for (const name of pathParams) {
        expect(op.parameters, `${route.path} names {${name}}`).toContainEqual(expect.objectContaining({ name, in: 'path', required: true }));
      }
      if (route.body) expect(op.requestBody?.content?.['application/json']?.schema).toBeDefined();
      const security = { none: [], session: [{ session: [] }], bearer: [{ bearer: [] }], either: [{ session: [] }, { bearer: [] }] }[route.auth as string];
      expect(security, `auth mode ${route.auth} of ${route.path} is known to this test`).toBeDefined();
      expect(op.security, `${route.method.toUpperCase()} ${route.path} (${route.auth})`).toEqual(security);
    }
    // ...and nothing that is not a route.
    const documented = Object.entries(doc.paths as Json).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m} ${p}`));
    expect(documented.sort()).toEqual(routes.map((r) => `${r.method} ${r.path}`).sort());
  });

  it("documents the refusals an app's data-plane calls can get: the grant's limits (429) on each, and the MCP proxy's 405 and 415", () => {
    const dataPlane: [string, string][] = [
      ['/v1/chat/completions', 'post'],
      ['/v1/completions', 'post'],
      ['/v1/embeddings', 'post'],
      ['/v1/responses', 'post'],
      ['/v1/messages', 'post'],
      ['/svc/v1/apps/mcps/{id}/mcp', 'post'],
      ['/svc/v1/apps/mcps/{id}/mcp', 'get'],
      ['/svc/v1/apps/mcps/{id}/mcp', 'delete'],
      ['/svc/v1/apps/mcps/{id}/tools/{tool_name}/execute', 'post'],
      ['/v1/messages/count_tokens', 'post'],
    ];
    for (const [path, method] of dataPlane) {
      const responses = doc.paths[path]?.[method]?.responses;
      expect(responses, `${method} ${path}`).toBeDefined();
      expect(responses['429']?.description, `${method} ${path}`).toMatch(/grant_rate_limited/);
    }
    for (const method of ['post', 'get', 'delete']) {
      const responses = doc.paths['/svc/v1/apps/mcps/{id}/mcp'][method].responses;
      expect(responses['405'].description).toMatch(/method_not_allowed/);
      expect(responses['415'].description).toMatch(/unsupported_media_type/);
      expect(responses['503'].description).toMatch(/^Unavailable for now/);
    }
  });

  it('answers the documented paths for real (no route documented but unmounted)', async () => {
    for (const route of d.app.routes) {
      const concrete = route.path.replace(/\{[^}]+\}/g, '00000000-0000-4000-8000-000000000000');
      const res = await fetch(`${d.url}${concrete}`, { method: route.method.toUpperCase(), headers: { 'Content-Type': 'application/json' }, body: route.method === 'get' ? undefined : '{}' });
      // Whatever the answer, it is this route's (a 405 would mean the method is not mounted).
      expect(res.status, `${route.method.toUpperCase()} ${route.path}`).not.toBe(405);
      expect(res.status).toBeLessThan(500);
      await res.text();
    }
  });

  it('resolves every $ref', () => {
    const refs = collectRefs(doc);
    expect(refs.length).toBeGreaterThan(0);
    for (const { ref, where } of refs) {
      expect(ref.startsWith('#/components/schemas/'), `${ref} at ${where}`).toBe(true);
      expect(resolvePointer(doc, ref), `${ref} at ${where}`).toBeDefined();
    }
  });

  it('serves the Swagger page and every asset it names from the daemon itself', async () => {
    const res = await fetch(`${d.url}/swagger-ui`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/html/);
    const html = await res.text();
    expect(html).toContain('/svc/v1/openapi.json');
    expect(html).not.toMatch(/fonts\.googleapis|fonts\.gstatic|cdnjs|unpkg|jsdelivr/i);
    expect(httpHosts(html).filter((h) => h !== own)).toEqual([]);

    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(httpHosts(csp)).toEqual([]);

    const urls = loadedUrls(html).filter((u) => !u.startsWith('data:') && !u.startsWith('#'));
    expect(urls.some((u) => u.endsWith('swagger-ui-bundle.js'))).toBe(true);
    expect(urls.some((u) => u.endsWith('swagger-ui-standalone-preset.js'))).toBe(true);
    expect(urls.some((u) => /\.css$/.test(u))).toBe(true);
    for (const u of urls) {
      const url = new URL(u, `${d.url}/swagger-ui`);
      expect(url.host, u).toBe(own);
      const asset = await fetch(url);
      expect(asset.status, u).toBe(200);
      const text = await asset.text();
      if (u.endsWith('.css')) {
        expect(asset.headers.get('content-type')).toMatch(/text\/css/);
        for (const ref of cssUrls(text).filter((r) => !r.startsWith('data:'))) expect(new URL(ref, url).host, `${u} -> ${ref}`).toBe(own);
      }
      if (u.endsWith('.js')) {
        expect(asset.headers.get('content-type')).toMatch(/javascript/);
        expect(text).not.toMatch(/sourceMappingURL=https?:/);
        // The bundle is served by us; what it may fetch is capped by the page's CSP (connect-src 'self').
        expect(text.length).toBeGreaterThan(1000);
      }
    }
  });

  it('serves only the known asset files, and only on GET', async () => {
    const version = (await (await fetch(`${d.url}/swagger-ui`)).text()).match(/\/swagger-ui\/assets\/([^/]+)\//)?.[1];
    expect(version).toBeTruthy();
    expect((await fetch(`${d.url}/swagger-ui/assets/${version}/package.json`)).status).toBe(404);
    expect((await fetch(`${d.url}/swagger-ui/assets/${version}/..%2Fpackage.json`)).status).toBe(404);
    expect((await fetch(`${d.url}/swagger-ui/assets/0.0.0/swagger-ui-bundle.js`)).status).toBe(404);
    const map = await fetch(`${d.url}/swagger-ui/assets/${version}/swagger-ui-bundle.js.map`);
    expect(map.status).toBe(200);
    expect(JSON.parse(await map.text())).toHaveProperty('mappings');
    const post = await fetch(`${d.url}/swagger-ui`, { method: 'POST' });
    expect(post.headers.get('content-type') ?? '').not.toMatch(/text\/html/);
    await post.text();
  });

  it.skipIf(!needs(Boolean(CHROMIUM), 'openapi (Swagger UI in a browser)', 'Chromium at /usr/bin/chromium'))('renders in a browser with every request on the daemon origin and no CSP violation', async () => {
    const { chromium } = await import('playwright-core');
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage();
      const requested: string[] = [];
      const problems: string[] = [];
      page.on('request', (r) => requested.push(r.url()));
      page.on('console', (m) => {
        if (m.type() === 'error') problems.push(m.text());
      });
      page.on('pageerror', (e) => problems.push(e.message));
      await page.goto(`${d.url}/swagger-ui`);
      await page.waitForSelector('.opblock', { timeout: 20_000 });
      expect(await page.locator('.opblock').count()).toBe(d.app.routes.length);
      expect(await page.locator('.errors-wrapper').count(), 'swagger-ui reports errors in the document').toBe(0);
      expect(requested.length).toBeGreaterThan(3);
      for (const u of requested) expect(new URL(u).host, u).toBe(own);
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
