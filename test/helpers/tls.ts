/**
 * A throwaway certificate authority and a server certificate for 127.0.0.1 (openssl, in a temp
 * dir), and an HTTPS server on loopback that serves JSON documents: a Client ID Metadata
 * Document host. A daemon trusts the CA through NODE_EXTRA_CA_CERTS, which Node reads only when
 * a process starts: so the daemon that must fetch from it runs as a `svc serve` child.
 */
import { readFile, writeFile } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { execa } from 'execa';

export interface TestCa {
  /** PEM file of the CA certificate, for NODE_EXTRA_CA_CERTS */
  caFile: string;
  key: Buffer;
  cert: Buffer;
}

export async function makeTestCa(dir: string): Promise<TestCa> {
  const f = (n: string) => path.join(dir, n);
  const run = async (args: string[]) => {
    const r = await execa('openssl', args, { cwd: dir, reject: false, timeout: 30_000 });
    if (r.exitCode !== 0) throw new Error(`openssl ${args.join(' ')} failed (${r.exitCode}): ${r.stderr}`);
  };
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await run(['req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '2', '-subj', '/CN=svc test CA (throwaway)',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  await run(['req', ...ec, '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=127.0.0.1']);
  await writeFile(f('server.ext'), 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n');
  await run(['x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('server.pem'), '-days', '2', '-extfile', f('server.ext')]);
  return { caFile: f('ca.pem'), key: await readFile(f('server.key')), cert: await readFile(f('server.pem')) };
}

/** An HTTPS server on 127.0.0.1 answering each path from `docs` (JSON), recording the hits. */
export async function startHttpsDocs(ca: TestCa, docs: Map<string, unknown>, headers: Record<string, string> = { 'Cache-Control': 'max-age=60' }) {
  const hits: string[] = [];
  const server = https.createServer({ key: ca.key, cert: ca.cert }, (req, res) => {
    const p = new URL(req.url ?? '/', 'https://127.0.0.1').pathname;
    hits.push(p);
    const doc = docs.get(p);
    if (doc === undefined) {
      res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":"not found"}');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/json', ...headers }).end(JSON.stringify(doc));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    hits,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
