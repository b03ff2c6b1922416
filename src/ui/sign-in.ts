import type { SignInPages } from '../oauth/provider.js';
import { html } from './html.js';
import { sendPage } from './login.js';
import { REVIEW_PATH } from './review.js';

/** The pages of a standard client's sign-in (the authorization server takes them by injection). */
export const signInPages: SignInPages = {
  reviewUrl: (id) => `${REVIEW_PATH}?id=${encodeURIComponent(id)}`,
  failure(ctx, status, title, heading, lines) {
    sendPage(ctx, status, title, () => html`<div class="card"><h1>${heading}</h1>${lines.map((l) => (l.kind ? html`<p class="${l.kind}">${l.text}</p>` : html`<p>${l.text}</p>`))}</div>`);
  },
};
