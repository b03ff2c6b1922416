import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, rename, unlink } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { type App, createApp } from './app.js';
import { generatePassword } from './auth/password.js';
import { saveCliSession } from './cli/credentials.js';
import { type Config, urlFor } from './config.js';
import type { AppDeps, Clock } from './http/context.js';
import { createLogger, type Logger } from './log.js';
import { SecretBox } from './store/crypto.js';
import { lockDataDir } from './store/lock.js';
import { type Keychain, type KeyBackend, osKeychain, resolveMasterKey } from './store/master-key.js';
import { Store } from './store/store.js';
import { VERSION } from './version.js';
import { DAEMON_FILE } from './daemon-info.js';

export { DAEMON_FILE };

export interface DaemonInfo {
  pid: number;
  url: string;
  base_url: string;
  version: string;
  key_backend: KeyBackend;
  started_at: string;
}

export interface DaemonOptions {
  config: Config;
  clock?: Clock;
  keychain?: Keychain;
  logger?: Logger;
  /** where the one-time notices (first admin password, key fallback) go; stderr by default */
  notify?: (line: string) => void;
}

export interface Daemon {
  url: string;
  baseUrl: string;
  port: number;
  store: Store;
  app: App;
  deps: AppDeps;
  keyBackend: KeyBackend;
  /** set only on the start that created the first admin */
  initialAdminPassword?: string;
  close(): Promise<void>;
}

async function writePrivateFile(file: string, text: string): Promise<void> {
  const tmp = `${file}.tmp`;
  const handle = await open(tmp, 'w', 0o600);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(tmp, file);
}

/** First start: the meta record with the key check and the sealed cookie-signing keys. */
async function initMeta(store: Store, box: SecretBox, backend: KeyBackend, clock: Clock): Promise<void> {
  if (store.data.meta) {
    try {
      if (box.open('meta', 'key_check', store.data.meta.key_check) !== 'svc') throw new Error('mismatch');
    } catch {
      throw new Error('The master key does not open this store (wrong keychain entry or master.key?). Nothing was changed.');
    }
    return;
  }
  await store.update((db) => {
    db.meta = {
      schema: 1,
      created_at: new Date(clock()).toISOString(),
      key_backend: backend,
      key_check: box.seal('meta', 'key_check', 'svc'),
      session_keys: box.seal('meta', 'session_keys', JSON.stringify([randomBytes(32).toString('base64url')])),
    };
  });
}

/** Logs the local CLI in over HTTP, exactly as `svc login` would, and keeps its cookie. */
async function loginCli(url: string, username: string, password: string): Promise<string> {
  const res = await fetch(`${url}/svc/v1/auth/login`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  if (!res.ok) throw new Error(`first login failed with ${res.status}`);
  return res.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .join('; ');
}

/**
 * Starts the daemon: lock the data dir, open the store (refusing a corrupt one), find the master
 * key, create the first admin on an empty store, then listen.
 */
export async function startDaemon(opts: DaemonOptions): Promise<Daemon> {
  const { config } = opts;
  const clock = opts.clock ?? Date.now;
  const logger = opts.logger ?? createLogger(config.logLevel);
  const notify = opts.notify ?? ((line: string) => process.stderr.write(`${line}\n`));

  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  await chmod(config.dataDir, 0o700);
  const lock = await lockDataDir(config.dataDir);
  const cleanups: (() => Promise<void>)[] = [lock.release];
  const unwind = async () => {
    for (const fn of cleanups.reverse()) await fn().catch(() => undefined);
  };

  try {
    const store = await Store.open(config.dataDir);
    cleanups.push(() => store.close());
    const master = await resolveMasterKey({
      dataDir: config.dataDir,
      existingBackend: store.data.meta?.key_backend ?? null,
      preference: config.keychain,
      keychain: opts.keychain ?? osKeychain,
    });
    if (master.notice) notify(`svc: ${master.notice}`);
    const box = new SecretBox(master.key);
    await initMeta(store, box, master.backend, clock);
    const sessionKeys = JSON.parse(box.open('meta', 'session_keys', store.data.meta!.session_keys)) as string[];

    // Listen first: the base URL (and so the issuer) depends on the port, which --port 0 picks.
    // Until the app is wired, requests get a plain 503.
    let handler: http.RequestListener = (_req, res) => {
      res.writeHead(503, { 'Content-Type': 'application/json', 'Retry-After': '1' });
      res.end(JSON.stringify({ error: { message: 'svc is starting', type: 'server_error', code: 'starting' } }));
    };
    const server = http.createServer({ requestTimeout: 60_000, headersTimeout: 20_000, keepAliveTimeout: 5_000 }, (req, res) => handler(req, res));
    server.maxHeadersCount = 100;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const port = (server.address() as AddressInfo).port;
    const url = urlFor(config.host, port);
    const baseUrl = config.baseUrl ?? url;
    cleanups.push(
      () =>
        new Promise<void>((resolve) => {
          // In-flight requests finish; idle keep-alive sockets close now, stragglers after 10 s.
          const force = setTimeout(() => server.closeAllConnections(), 10_000);
          force.unref();
          server.close(() => {
            clearTimeout(force);
            resolve();
          });
          server.closeIdleConnections();
        }),
    );

    const deps: AppDeps = { config, store, box, clock, logger, baseUrl: () => baseUrl };
    const app = await createApp(deps, { sessionKeys, port });
    handler = app.callback;
    cleanups.push(() => app.close());

    let initialAdminPassword: string | undefined;
    if (store.data.users.length === 0) {
      initialAdminPassword = generatePassword();
      await app.users.create(null, { username: 'admin', role: 'admin', password: initialAdminPassword });
    }

    const infoFile = path.join(config.dataDir, DAEMON_FILE);
    const info: DaemonInfo = { pid: process.pid, url, base_url: baseUrl, version: VERSION, key_backend: master.backend, started_at: new Date().toISOString() };
    await writePrivateFile(infoFile, JSON.stringify(info, null, 2));
    cleanups.splice(1, 0, () => unlink(infoFile).catch(() => undefined));

    if (initialAdminPassword) {
      const cookie = await loginCli(url, 'admin', initialAdminPassword);
      await saveCliSession(config.dataDir, master.backend, box, cookie);
      notify(
        [
          '',
          'svc: first start. Created the user "admin" with this password (shown only once):',
          '',
          `    ${initialAdminPassword}`,
          '',
          'The svc CLI on this machine is logged in as admin. Use the password for the browser review page.',
          '',
        ].join('\n'),
      );
    }
    logger.info({ url, baseUrl, dataDir: config.dataDir, version: VERSION, keyBackend: master.backend }, 'svc listening');

    let closing: Promise<void> | null = null;
    return {
      url,
      baseUrl,
      port,
      store,
      app,
      deps,
      keyBackend: master.backend,
      initialAdminPassword,
      close: () => (closing ??= unwind().then(() => logger.info('svc stopped'))),
    };
  } catch (err) {
    await unwind();
    throw err;
  }
}
