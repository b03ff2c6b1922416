/**
 * Where svc fetches a Client ID Metadata Document from, and how much of one it reads. An https
 * client_id is a URL anyone may name at the authorization endpoint, before any sign-in: svc must
 * not become a way to reach the machine's own or private addresses, and a huge document must
 * cost it nothing. The same document host (loopback, trusted through a throwaway CA) is asked by
 * two daemons: one as shipped, which must not even send it a request, and one started with
 * SVC_CLIENT_METADATA_ALLOW_LOOPBACK=1, which does (so the refusal is the address rule, not TLS).
 *
 * The daemons run as `svc serve` children (dist/: run `npm run build` first): Node reads
 * NODE_EXTRA_CA_CERTS only at process start.
 */
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { cleanEnv, type ServeProcess, startServe } from './helpers/cli.js';
import { tempDir } from './helpers/daemon.js';
import { makeTestCa, startHttpsDocs } from './helpers/tls.js';

vi.setConfig({ testTimeout: 60_000, hookTimeout: 60_000 });

const CALLBACK = 'http://127.0.0.1:65010/callback';

describe('client metadata documents: fetched from public addresses only, and small', () => {
  let root: string;
  let docs: Awaited<ReturnType<typeof startHttpsDocs>>;
  const documents = new Map<string, unknown>();
  const daemons: ServeProcess[] = [];

  const serve = async (name: string, extra: Record<string, string>) => {
    const dataDir = path.join(root, name);
    await mkdir(dataDir, { recursive: true });
    const d = await startServe(dataDir, cleanEnv({ SVC_KEYCHAIN: 'file', SVC_HOME: dataDir, NODE_EXTRA_CA_CERTS: path.join(root, 'ca', 'ca.pem'), ...extra }));
    daemons.push(d);
    return d.url;
  };
  const doc = (docPath: string, extra: Record<string, unknown> = {}) => {
    documents.set(docPath, { client_id: `${docs.origin}${docPath}`, client_name: 'Doc host', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none', ...extra });
    return `${docs.origin}${docPath}`;
  };
  /** The first answer of the authorization endpoint to this client: no session needed to make svc fetch. */
  const authorize = (base: string, clientId: string) => {
    const url = new URL(`${base}/oauth/auth`);
    const params = { client_id: clientId, response_type: 'code', redirect_uri: CALLBACK, code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256' };
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    return fetch(url, { redirect: 'manual' });
  };

  beforeAll(async () => {
    root = await tempDir('svc-cimd-');
    await mkdir(path.join(root, 'ca'));
    docs = await startHttpsDocs(await makeTestCa(path.join(root, 'ca')), documents);
  });
  afterAll(async () => {
    await Promise.all(daemons.map((d) => d.stop()));
    await docs?.close();
    if (root) await rm(root, { recursive: true, force: true });
  });

  it('as shipped, a document on a loopback address is refused before any request reaches it', async () => {
    const base = await serve('shipped', {});
    const clientId = doc('/shipped/client.json');
    const res = await authorize(base, clientId);
    expect(res.status).toBe(400);
    expect(await res.text()).toMatch(/invalid_client/);
    // the connection was cut before a request was sent
    expect(docs.hits).not.toContain('/shipped/client.json');
  });

  it('allowed onto loopback, the same host is asked; a document above 5 KiB is refused, a small one taken', async () => {
    const base = await serve('allowed', { SVC_CLIENT_METADATA_ALLOW_LOOPBACK: '1' });
    const small = doc('/allowed/client.json');
    const huge = doc('/allowed/huge.json', { client_name: 'x'.repeat(6 * 1024) });
    const refused = await authorize(base, huge);
    expect(refused.status).toBe(400);
    expect(await refused.text()).toMatch(/invalid_client/);
    expect(docs.hits).toContain('/allowed/huge.json');
    // a client it accepts goes on to the sign-in (here: the login page, there being no session)
    const taken = await authorize(base, small);
    expect(taken.status, await taken.text()).toBe(303);
    expect(docs.hits).toContain('/allowed/client.json');
  });
});
