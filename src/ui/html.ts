import { randomBytes } from 'node:crypto';
import { relativeWhen } from '../text.js';

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

/** Escapes text for HTML element content and quoted attribute values. Every app-supplied string goes through it. */
export function escapeHtml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"'`]/g, (c) => ESCAPES[c]);
}

/** A tagged template that escapes every interpolation unless it is already `SafeHtml`. */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString() {
    return this.value;
  }
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): SafeHtml {
  let out = strings[0];
  values.forEach((v, i) => {
    const part = Array.isArray(v) ? v.map((x) => (x instanceof SafeHtml ? x.value : escapeHtml(x))).join('') : v instanceof SafeHtml ? v.value : escapeHtml(v);
    out += part + strings[i + 1];
  });
  return new SafeHtml(out);
}

/**
 * A time on a page: said as people read it ("5 min ago", by the daemon's clock when the page was
 * made), with the ISO time as its datetime (and on hover), which a browser may read as its own.
 */
export const timeHtml = (iso: string, now: number): SafeHtml => html`<time datetime="${iso}" title="${iso}">${relativeWhen(iso, now)}</time>`;

export const newNonce = () => randomBytes(16).toString('base64');

/** No external assets, no framing, scripts only with this response's nonce. */
export function contentSecurityPolicy(nonce: string): string {
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    "img-src 'self' data:",
    // the pages that update by themselves ask svc's own API, and nothing else
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

const STYLE = `
:root{color-scheme:light dark;--fg:#1b1f24;--bg:#f6f7f9;--card:#fff;--muted:#59636e;--accent:#0b5cd5;--danger:#b42318;--border:#d0d7de}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--bg:#0d1117;--card:#161b22;--muted:#9198a1;--accent:#4493f8;--danger:#f85149;--border:#30363d}}
*{box-sizing:border-box}body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:40rem;margin:2rem auto;padding:0 1rem}.card{background:var(--card);border:1px solid var(--border);border-radius:12px;padding:1.5rem}
h1{font-size:1.35rem;margin:0 0 1rem}label{display:block;font-weight:600;margin:.75rem 0 .25rem}
input[type=text],input[type=password],select{width:100%;padding:.6rem .7rem;font:inherit;border:1px solid var(--border);border-radius:8px;background:var(--bg);color:var(--fg)}
button{font:inherit;padding:.6rem 1.1rem;border-radius:8px;border:1px solid var(--border);cursor:pointer;background:var(--card);color:var(--fg)}
button.primary{background:var(--accent);border-color:var(--accent);color:#fff}button.danger{color:var(--danger)}
button:focus-visible,input:focus-visible,select:focus-visible,a:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
.muted{color:var(--muted)}.error{color:var(--danger);font-weight:600}.actions{display:flex;gap:.75rem;margin-top:1.25rem;flex-wrap:wrap}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}
`;

export function page(opts: { title: string; nonce: string; body: SafeHtml; script?: string }): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><title>${escapeHtml(opts.title)} · svc</title><style nonce="${opts.nonce}">${STYLE}</style></head>
<body><main>${opts.body.value}</main>${opts.script ? `<script nonce="${opts.nonce}">${opts.script}</script>` : ''}</body></html>`;
}
