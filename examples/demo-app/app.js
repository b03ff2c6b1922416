// The demo app's whole client side: request access, review in a popup, poll, then
// authorization code + PKCE (S256) in a second popup, and use the token.
const config = await (await fetch('/config.json')).json();
const $ = (id) => document.getElementById(id);
const say = (text) => ($('status').textContent = text);

const b64url = (bytes) => btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
const randomString = () => b64url(crypto.getRandomValues(new Uint8Array(32)));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function requestAccess() {
  const servers = $('mcp').value.split(',').map((s) => s.trim()).filter(Boolean);
  const res = await fetch(`${config.svc}/svc/v1/apps/request-access`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({
      app_client_id: config.clientId,
      flow_type: 'popup',
      requested_role: $('role').value,
      requested: { version: '1', mcp_servers: servers.map((url) => ({ url })) },
    }),
  });
  const body = await res.json();
  if (!res.ok) throw new Error(body.error?.message ?? `request failed (${res.status})`);
  return body;
}

async function poll(id) {
  for (;;) {
    const res = await fetch(`${config.svc}/svc/v1/apps/access-requests/${id}?app_client_id=${encodeURIComponent(config.clientId)}`);
    const body = await res.json();
    if (body.status !== 'draft') return body;
    await sleep(1000);
  }
}

async function getToken(scope) {
  const verifier = randomString();
  const challenge = b64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
  const state = randomString();
  const discovery = await (await fetch(`${config.svc}/oauth/.well-known/openid-configuration`)).json();
  const url = new URL(discovery.authorization_endpoint);
  for (const [k, v] of Object.entries({ client_id: config.clientId, response_type: 'code', redirect_uri: config.redirectUri, scope, state, code_challenge: challenge, code_challenge_method: 'S256' })) {
    url.searchParams.set(k, v);
  }
  const callback = new Promise((resolve) => {
    window.addEventListener('message', function onMessage(event) {
      if (event.origin !== location.origin || event.data?.type !== 'svc-callback') return;
      window.removeEventListener('message', onMessage);
      resolve(event.data.params);
    });
  });
  window.open(url, 'svc-signin', 'width=520,height=640');
  const params = await callback;
  if (params.error) throw new Error(`${params.error}: ${params.error_description ?? ''}`);
  if (params.state !== state) throw new Error('state mismatch');
  const res = await fetch(discovery.token_endpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code: params.code, redirect_uri: config.redirectUri, client_id: config.clientId, code_verifier: verifier }),
  });
  const tokens = await res.json();
  if (!res.ok) throw new Error(tokens.error_description ?? tokens.error);
  return tokens.access_token;
}

async function useToken(token) {
  const auth = { Authorization: `Bearer ${token}` };
  const models = await (await fetch(`${config.svc}/v1/models`, { headers: auth })).json();
  $('models').textContent = (models.data ?? []).map((m) => m.id).join('\n') || '(no models: add a provider with `svc providers add`)';
  const instances = await (await fetch(`${config.svc}/svc/v1/apps/mcps`, { headers: auth })).json();
  const lines = [];
  for (const instance of instances.data ?? []) {
    const res = await fetch(`${config.svc}/svc/v1/apps/mcps/${instance.id}/tools/refresh`, { method: 'POST', headers: auth });
    const body = await res.json();
    lines.push(`${instance.name}: ${res.ok ? body.tools.map((t) => t.name).join(', ') : body.error.message}`);
  }
  $('tools').textContent = lines.join('\n') || '(no MCP instances in this grant)';
}

$('ask').addEventListener('click', async () => {
  try {
    say('Asking svc…');
    const created = await requestAccess();
    window.open(created.review_url, 'svc-review', 'width=560,height=760');
    say('Waiting for your decision in the svc window…');
    const decided = await poll(created.id);
    if (decided.status !== 'approved') return say(`The request was ${decided.status}.`);
    say(`Approved as ${decided.approved_role}; signing in…`);
    const token = await getToken(decided.access_request_scope);
    say('Got a token scoped to exactly that grant.');
    await useToken(token);
    say('Done: listed what the grant allows.');
  } catch (err) {
    say(`Error: ${err.message}`);
  }
});
