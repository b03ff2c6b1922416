import { createHash } from 'node:crypto';
import { createReadStream, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Middleware } from 'koa';
import type { AppState } from '../http/context.js';

export const SWAGGER_ROUTE = '/swagger-ui';

const require = createRequire(import.meta.url);
const distDir = path.dirname(require.resolve('swagger-ui-dist/package.json'));
/** The installed swagger-ui-dist version; it is part of the asset paths, so they may be cached for good. */
export const SWAGGER_UI_VERSION: string = (JSON.parse(readFileSync(path.join(distDir, 'package.json'), 'utf8')) as { version: string }).version;
export const SWAGGER_ASSETS = `${SWAGGER_ROUTE}/assets/${SWAGGER_UI_VERSION}`;

/** The only files served, by URL name. koa2-swagger-ui's template asks for the CDN's `swagger-ui.min.css`. */
const ASSETS: Record<string, { file: string; type: string }> = {
  'swagger-ui.min.css': { file: 'swagger-ui.css', type: 'text/css; charset=utf-8' },
  'swagger-ui.css': { file: 'swagger-ui.css', type: 'text/css; charset=utf-8' },
  'swagger-ui.css.map': { file: 'swagger-ui.css.map', type: 'application/json' },
  'swagger-ui-bundle.js': { file: 'swagger-ui-bundle.js', type: 'text/javascript; charset=utf-8' },
  'swagger-ui-bundle.js.map': { file: 'swagger-ui-bundle.js.map', type: 'application/json' },
  'swagger-ui-standalone-preset.js': { file: 'swagger-ui-standalone-preset.js', type: 'text/javascript; charset=utf-8' },
  'swagger-ui-standalone-preset.js.map': { file: 'swagger-ui-standalone-preset.js.map', type: 'application/json' },
  'favicon-32x32.png': { file: 'favicon-32x32.png', type: 'image/png' },
  'favicon-16x16.png': { file: 'favicon-16x16.png', type: 'image/png' },
};

/**
 * Renders koa2-swagger-ui's page once, pointed at the local swagger-ui-dist files instead of its
 * CDN. Its template hard-codes a Google Fonts stylesheet that no option removes, so that link is
 * cut out of the rendered page (swagger-ui falls back to its own font stacks), and the page's CSP
 * keeps the browser from fetching anything that is not on this origin.
 */
async function renderPage(specUrl: string): Promise<{ html: string; csp: string }> {
  // Loaded on the first visit only: most daemons never show the page, and it is a few MiB.
  const { koaSwagger } = await import('koa2-swagger-ui');
  const ui = koaSwagger({
    routePrefix: SWAGGER_ROUTE,
    title: 'svc API',
    swaggerCdnUrl: `${SWAGGER_ROUTE}/assets`,
    swaggerVersion: SWAGGER_UI_VERSION,
    favicon: `${SWAGGER_ASSETS}/favicon-32x32.png`,
    hideTopbar: true,
    swaggerOptions: { url: specUrl, validatorUrl: null, docExpansion: 'list', deepLinking: true },
  });
  const fake = { path: SWAGGER_ROUTE, type: '', body: '' as unknown };
  void ui(fake as never, async () => undefined);
  if (typeof fake.body !== 'string') throw new Error('koa2-swagger-ui did not render its page');
  const html = fake.body.replace(/<link\b[^>]*\bhref="https?:\/\/fonts\.(?:googleapis|gstatic)\.com[^"]*"[^>]*>\s*/gi, '');
  const hashes = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => `'sha256-${createHash('sha256').update(m[1]).digest('base64')}'`);
  const csp = [
    "default-src 'none'",
    `script-src 'self' ${hashes.join(' ')}`,
    // swagger-ui sets style attributes from script, and the template has one inline <style>.
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
  return { html, csp };
}

/** `GET /swagger-ui` (the page) and `GET /swagger-ui/assets/<version>/<file>` (swagger-ui-dist, no CDN). */
export function swaggerUi(specUrl: string): Middleware<AppState> {
  let page: Promise<{ html: string; csp: string }> | null = null;
  const assetPrefix = `${SWAGGER_ASSETS}/`;
  return async function serveSwaggerUi(ctx, next) {
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return next();
    if (ctx.path === SWAGGER_ROUTE || ctx.path === `${SWAGGER_ROUTE}/`) {
      page ??= renderPage(specUrl);
      const { csp, html } = await page;
      ctx.set('Content-Security-Policy', csp);
      ctx.type = 'text/html; charset=utf-8';
      ctx.body = html;
      return;
    }
    if (ctx.path.startsWith(assetPrefix)) {
      const name = ctx.path.slice(assetPrefix.length);
      const asset = Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined;
      if (!asset) return next();
      ctx.type = asset.type;
      ctx.set('Cache-Control', 'public, max-age=31536000, immutable');
      ctx.body = createReadStream(path.join(distDir, asset.file));
      return;
    }
    return next();
  };
}
