import { randomBytes, timingSafeEqual } from 'node:crypto';
import { chmod, unlink } from 'node:fs/promises';
import http from 'node:http';
import net, { type AddressInfo, type Socket } from 'node:net';
import path from 'node:path';
import { ActivityLog } from './activity/log.js';
import type { ActivityBounds, ActivityStore } from './activity/store.js';
import { type App, createApp } from './app.js';
import { generatePassword } from './auth/password.js';
import { saveCliSession } from './store/cli-session.js';
import { type Config, type Secret, urlFor } from './config.js';
import type { AppDeps, Clock } from './http/context.js';
import { answerParserError } from './http/errors-middleware.js';
import { createLogger, type Logger } from './log.js';
import { StartSteps } from './start-steps.js';
import { SecretBox } from './store/crypto.js';
import { reduceMemoryWhenIdle } from './store/memory.js';
import { FileWriteError, writeFileDurably } from './store/durable-file.js';
import { LocalGrantUsage } from './store/grant-days.js';
import { lockDataDir } from './store/lock.js';
import { checkStoreKey, type Keychain, type KeyBackend, type MasterKey, MASTER_KEY_FILE, osKeychain, resolveMasterKey, teamMasterKey } from './store/master-key.js';
import { DatabaseUnavailableError, redactDatabaseUrl } from './store/postgres/url.js';
import type { Repositories } from './store/repositories.js';
import type { DbMeta } from './store/schema.js';
import { storeRepositories } from './store/store-repositories.js';
import { Store } from './store/store.js';
import { VERSION } from './version.js';
import { COMMAND_DEFAULTS, CommandSupervisor } from './mcp/command/supervisor.js';
import { checkDataDir, checkPrivateDir, DAEMON_FILE, INSTANCE_HEADER, LOCAL_LOGIN_LABEL, localSocketPlace } from './daemon-info.js';

export { DAEMON_FILE };

export interface DaemonInfo {
  pid: number;
  url: string;
  base_url: string;
  version: string;
  key_backend: KeyBackend;
  started_at: string;
  /** random per start; the daemon answers it in X-Svc-Instance */
  instance?: string;
  /** the Unix socket the CLI of this data dir talks to (see localSocketPlace) */
  socket?: string;
}

export interface DaemonOptions {
  config: Config;
  clock?: Clock;
  keychain?: Keychain;
  logger?: Logger;
  /**
   * where the one-time notices (first admin password, key fallback) go; stderr by default. A
   * promise that rejects means the notice was not shown (a closed stdout).
   */
  notify?: (line: string) => void | Promise<void>;
  /**
   * Aborting it at any point of startup stops the start: what was done is undone (the lock,
   * daemon.json) and startDaemon rejects with StartupAbortedError. After startup it does nothing;
   * call close().
   */
  signal?: AbortSignal;
  /**
   * Called once the daemon has stopped itself because a saved change could not be applied (the
   * next start loads it from the journal). By default the process exits with code 1.
   */
  onFatal?: (err: Error) => void;
}

export interface Daemon {
  url: string;
  baseUrl: string;
  port: number;
  /** the data dir's file store; a team server has none (reading it throws): its data is in deps.repos */
  store: Store;
  /** where the state lives: the data dir's file store, or a team's PostgreSQL */
  storeKind: 'file' | 'postgres';
  /** what apps did: the data dir's activity log, or on a team server the team's, in its PostgreSQL */
  activity: ActivityStore;
  app: App;
  deps: AppDeps;
  keyBackend: KeyBackend;
  /** set only on the start that created the first admin (or gave it a new password, its first one never shown) */
  initialAdminPassword?: string;
  close(): Promise<void>;
}

/** First start: the meta record with the key check and the sealed cookie-signing keys. */
async function initMeta(repos: Repositories, box: SecretBox, backend: DbMeta['key_backend'], clock: Clock): Promise<DbMeta> {
  const meta = await repos.meta.get();
  if (meta) {
    checkStoreKey(box, meta.key_check, backend === 'team');
    return meta;
  }
  const created: DbMeta = {
    schema: 1,
    created_at: new Date(clock()).toISOString(),
    key_backend: backend,
    key_check: box.seal('meta', 'key_check', 'svc'),
    session_keys: box.seal('meta', 'session_keys', JSON.stringify([randomBytes(32).toString('base64url')])),
  };
  await repos.meta.set(created);
  return created;
}

/** Where the daemon's state lives, opened: the data dir's journaled store, or a team's PostgreSQL. */
interface Backend {
  kind: 'file' | 'postgres';
  repos: Repositories;
  store: Store | null;
  /** why the last write failed, when a file names it */
  lastWriteError: () => unknown;
  /**
   * Holds the first-start setup (meta, signing keys, first admin) until the answered function is
   * called: on a team store one replica at a time, so replicas that start together on an empty
   * database make one admin, not one each. Nothing to hold on a data dir's own store.
   */
  holdSetup: (stillWanted: () => void) => Promise<() => Promise<void>>;
  /** where the activity goes: beside the state, so a team's replicas share it as they share the rest */
  openActivity: (bounds: ActivityBounds, clock: Clock, logger: Logger) => Promise<ActivityStore>;
  close: () => Promise<void>;
}

async function openFileBackend(dataDir: string, logger: Logger, onFatal: (err: Error) => void): Promise<Backend> {
  const store = await Store.open(dataDir, undefined, {
    // The journal still holds everything: a failed snapshot costs start time, never data.
    onCompactionError: (err) => logger.warn({ err: (err as Error)?.message }, 'store snapshot failed; the journal keeps every change'),
    onWriteError: (err) => logger.error({ file: (err as FileWriteError)?.file, err: (err as Error)?.message }, 'store write failed; changes answer 503 until it can write again'),
    onWriteRecovered: () => logger.info('store writes succeed again'),
    onFatal: (err) => {
      logger.error({ file: store.file, err: String((err.cause as Error)?.stack ?? err.cause) }, 'store: a saved change could not be applied; svc stops, and the next start loads it');
      onFatal(err);
    },
  });
  // each limited grant's tokens on its day, apart from the activity log (store/grant-days.ts)
  const grantUsage = await LocalGrantUsage.open(dataDir, (err) => logger.warn({ err: err.message }, "could not keep the grants' tokens for today"));
  return {
    kind: 'file',
    repos: { ...storeRepositories(store), grantUsage },
    store,
    lastWriteError: () => store.lastWriteError,
    holdSetup: async () => async () => undefined,
    openActivity: (bounds, clock, logger) => ActivityLog.open(dataDir, bounds, clock, logger),
    close: async () => {
      await grantUsage.flush();
      await store.close();
    },
  };
}

/** The team store; `pg` is loaded only here, so a file store's daemon never carries it. */
async function openTeamBackend(database: Secret, logger: Logger): Promise<Backend> {
  const url = database.reveal();
  const where = redactDatabaseUrl(url);
  const { openTeamStore } = await import('./store/postgres/connect.js');
  let team;
  try {
    team = await openTeamStore(url, {
      onError: (message) => logger.warn({ database: where }, message),
      onRecovered: () => logger.info({ database: where }, 'following other replicas again'),
    });
  } catch (err) {
    throw new DatabaseUnavailableError(where, (err as Error)?.message ?? String(err));
  }
  logger.info({ database: where }, 'state is kept in PostgreSQL');
  const { PostgresActivity } = await import('./activity/postgres.js');
  return {
    kind: 'postgres',
    repos: team.repos,
    store: null,
    lastWriteError: () => null,
    holdSetup: (stillWanted) => team.holdFirstStart(stillWanted),
    openActivity: async (bounds, clock, log) => new PostgresActivity(team.pool, bounds, clock, log),
    close: () => team.close(),
  };
}

/**
 * The key that seals the store's secrets, and what meta records of where it lives: the team's on
 * a team store (given to every replica); else this data dir's (`local`), found or created.
 */
async function storeKeyFor(config: Config, repos: Repositories, keychain: Keychain): Promise<{ key: Buffer; stored: DbMeta['key_backend']; local?: MasterKey }> {
  if (config.database) return { key: await teamMasterKey(config.masterKey), stored: 'team' };
  const existingBackend = (await repos.meta.get())?.key_backend ?? null;
  const local = await resolveMasterKey({ dataDir: config.dataDir, existingBackend, preference: config.keychain, keychain });
  return { key: local.key, stored: local.backend, local };
}

/**
 * A team replica's own key, for what is only this machine's: the CLI's saved login and its
 * local-login proof. Kept in the data dir's master.key; the team's data is sealed with the team's key.
 */
async function replicaKey(dataDir: string, keychain: Keychain): Promise<MasterKey> {
  const local = await resolveMasterKey({ dataDir, existingBackend: null, preference: 'file', keychain });
  const file = path.join(dataDir, MASTER_KEY_FILE);
  return { ...local, notice: local.notice && `This replica's CLI login is sealed with a key of its own, kept in ${file} (0600); the team's data is sealed with the team's master key.` };
}

/** The header that lets the daemon's own first login through while everyone else gets 503. */
const SETUP_HEADER = 'x-svc-setup';
/** how long the daemon must have served nothing before it hands memory back (store/memory.ts) */
const IDLE_MEMORY_MS = 5_000;

/**
 * Logs the local CLI in over HTTP, exactly as `svc login` would, and keeps its cookie. node:http,
 * not fetch: fetch's first use loads Node's bundled HTTP client, which the daemon then kept.
 */
async function loginCli(url: string, setupToken: string, username: string, password: string, lastWriteError: () => unknown): Promise<string> {
  const body = JSON.stringify({ username, password });
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    const req = http.request(`${url}/svc/v1/auth/login`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), [SETUP_HEADER]: setupToken },
      agent: false,
    });
    req.on('response', resolve).on('error', reject).end(body);
  });
  res.resume();
  await new Promise((resolve) => res.on('end', resolve).on('close', resolve));
  const status = res.statusCode ?? 0;
  if (status < 200 || status > 299) {
    // the session could not be written (a full disk): say which file, as every other step does
    const cause = lastWriteError();
    if (status === 503 && cause instanceof FileWriteError) throw cause;
    throw new Error(`first login failed with ${status}`);
  }
  return (res.headers['set-cookie'] ?? []).map((c) => c.split(';')[0]).join('; ');
}

/** What every request gets until setup is complete: the error shape (decisions: Errors), and when to come back. */
function answerStarting(res: http.ServerResponse, instanceId: string): void {
  const body = JSON.stringify({ error: { message: 'svc is starting; try again in a moment.', type: 'server_error', code: 'starting' } });
  res.writeHead(503, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Retry-After': '1', 'Cache-Control': 'no-store', [INSTANCE_HEADER]: instanceId });
  res.end(body);
}

/**
 * Listens on the data dir's Unix socket for the CLI, handing every connection to the HTTP server,
 * so the CLI is served by the same app, with the same accounting at shutdown, as any client.
 */
async function listenForCli(server: http.Server, dataDir: string): Promise<{ path: string; close: () => Promise<void> }> {
  const place = localSocketPlace(dataDir);
  await checkPrivateDir(place.dir, place.dir !== dataDir);
  // The data dir is locked by this process: a socket file here is a dead daemon's.
  await unlink(place.path).catch(() => undefined);
  const local = net.createServer((socket) => server.emit('connection', socket));
  await new Promise<void>((resolve, reject) => {
    local.once('error', reject);
    local.listen(place.path, () => {
      local.off('error', reject);
      resolve();
    });
  });
  await chmod(place.path, 0o600);
  return {
    path: place.path,
    close: async () => {
      // Stops taking connections, without waiting for those it took: they are the HTTP server's,
      // whose close (the next stop step) ends the idle ones at once and waits for the busy ones.
      // Waiting here held a stop for as long as an idle CLI connection's keep-alive (5 s).
      local.close();
      await unlink(place.path).catch(() => undefined);
    },
  };
}

/**
 * The first admin and the mark that its password is unshown are one write; the mark goes once the
 * password is printed. A start that finds the mark (the first start was killed, or its disk
 * filled, before the password reached the screen) gives that account a new password and shows it:
 * nobody knows the old one, so nothing is lost. Answers the password when it made or reset one.
 */
async function firstAdmin(
  wired: App,
  steps: { login: (username: string, password: string) => Promise<string>; saveLogin: (cookie: string) => Promise<void>; notify: (line: string) => void | Promise<void>; checkpoint: () => void },
): Promise<string | undefined> {
  const noUsers = (await wired.users.count()) === 0;
  let admin = noUsers ? undefined : await wired.users.unshownPasswordUser();
  const interrupted = admin !== undefined;
  if (!noUsers && !admin) return undefined;
  const password = generatePassword();
  if (admin) await wired.users.resetUnshownPassword(admin.id, password);
  else admin = await wired.users.createFirstAdmin(password);
  steps.checkpoint();
  await steps.saveLogin(await steps.login(admin.username, password));
  steps.checkpoint();
  await steps.notify(
    [
      '',
      interrupted
        ? `svc: the first start was interrupted before the password of "${admin.username}" was shown. It has a new one (shown only once):`
        : 'svc: first start. Created the user "admin" with this password (shown only once):',
      '',
      `    ${password}`,
      '',
      `The svc CLI on this machine is logged in as ${admin.username}. Use the password for the browser review page.`,
      ...(interrupted ? [`With svc stopped, \`svc users passwd ${admin.username} --offline\` sets a password at any time.`] : []),
      '',
    ].join('\n'),
  );
  steps.checkpoint();
  await wired.users.markPasswordShown(admin.id);
  return password;
}

/**
 * The HTTP server, listening on the configured host and port, with its requests in flight per
 * connection: at shutdown (close) a connection with none is closed at once, including one that
 * never sent a request (a browser's spare socket), which Node's closeIdleConnections leaves to
 * wait for the timeout; in-flight requests finish, stragglers are cut after 10 s.
 */
async function listenHttp(config: Config, handle: http.RequestListener, app: () => App | null, logger: Logger) {
  const server = http.createServer({ requestTimeout: 60_000, headersTimeout: 20_000, keepAliveTimeout: 5_000 }, handle);
  server.maxHeadersCount = 100;
  server.on('clientError', answerParserError);
  const inFlight = new Map<Socket, number>();
  let stopping = false;
  server.on('connection', (socket: Socket) => {
    inFlight.set(socket, 0);
    socket.once('close', () => inFlight.delete(socket));
  });
  let served = 0;
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    served++;
    const socket = req.socket;
    inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1);
    res.once('close', () => {
      const left = (inFlight.get(socket) ?? 1) - 1;
      inFlight.set(socket, left);
      if (stopping && left === 0) socket.destroySoon();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const close = () =>
    new Promise<void>((resolve) => {
      stopping = true;
      const force = setTimeout(() => {
        logger.warn({ connections: inFlight.size }, 'shutdown: closing connections still busy after 10 s');
        server.closeAllConnections();
      }, 10_000);
      force.unref();
      server.close(() => {
        clearTimeout(force);
        resolve();
      });
      // A stream with no end of its own (an MCP host's GET stream) would hold the whole grace:
      // it ends now, once nothing new can connect; its connection then closes like an idle one.
      app()?.endOpenStreams();
      for (const [socket, busy] of inFlight) if (busy === 0) socket.destroy();
    });
  return { server, close, served: () => served };
}

/** The supervisor of command MCP servers, with the leftovers of a previous start ended; on svc's clock, as its back-off waits are. */
async function startCommandServers(config: Config, logger: Logger, clock: Clock): Promise<CommandSupervisor> {
  const supervisor = new CommandSupervisor({
    recordFile: path.join(config.dataDir, 'command-children.json'),
    logger,
    maxPerInstance: config.stdioMaxProcesses,
    maxTotal: config.stdioMaxProcessesTotal,
    idleTimeoutMs: config.stdioIdleTimeoutS * 1000,
    maxLineBytes: COMMAND_DEFAULTS.maxLineBytes,
    clock,
  });
  const ended = await supervisor.reapLeftovers();
  if (ended > 0) logger.warn({ ended }, 'ended command servers a previous svc left running');
  return supervisor;
}

/** Thrown by startDaemon when its signal aborts it: everything it had done is undone. */
export class StartupAbortedError extends Error {
  constructor() {
    super('svc was stopped while starting');
    this.name = 'StartupAbortedError';
  }
}

/**
 * daemon.json for this start. Run as a step right after the lock, so that it is undone last but
 * the lock, once nothing answers any more; written later, once the port is open and the key
 * checked. Removed only when this start began to write it: a start refused before then leaves
 * the file as it found it.
 */
function daemonFile(dataDir: string) {
  const file = path.join(dataDir, DAEMON_FILE);
  let written = false;
  return {
    write: async (info: DaemonInfo) => {
      written = true;
      await writeFileDurably(file, JSON.stringify(info, null, 2));
    },
    remove: async () => {
      if (written) await unlink(file).catch(() => undefined);
    },
  };
}

/**
 * Starts the daemon: lock the data dir, open the store (refusing a corrupt one), listen
 * (answering 503 to everyone), find the master key, wire the app, create the first admin on an
 * empty store and log the local CLI in; only then serve. Nothing is written before the store is
 * read and the port is bound. Each of these is a named step (StartSteps): close() undoes them in
 * the reverse of the order they ran, and so does a start that does not finish.
 */
export async function startDaemon(opts: DaemonOptions): Promise<Daemon> {
  const { config, signal } = opts;
  const clock = opts.clock ?? Date.now;
  const logger = opts.logger ?? createLogger(config.logLevel);
  const notify = opts.notify ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const checkpoint = () => {
    if (signal?.aborted) throw new StartupAbortedError();
  };

  checkpoint();
  // the data dir is the user's own before anything is written in it or read from it
  await checkDataDir(config.dataDir, true);
  const steps = new StartSteps(logger, checkpoint);

  try {
    // Its pid goes into daemon.lock only once the checks below have passed: a refused start changes no file.
    const lock = await steps.run('lock', () => lockDataDir(config.dataDir, { recordPid: false }), (l) => l.release());
    const infoFile = await steps.run('daemon.json', () => daemonFile(config.dataDir), (f) => f.remove());
    let stopForFatal: (err: Error) => void = () => undefined; // during the start, the failed write ends the start itself
    const backend = await steps.run(
      'store',
      () => (config.database ? openTeamBackend(config.database, logger) : openFileBackend(config.dataDir, logger, (err) => stopForFatal(err))),
      (b) => b.close(),
    );
    const { repos } = backend;

    // Listen first: the base URL (and so the issuer) depends on the port, which --port 0 picks.
    // Until setup is complete every request gets a 503 with Retry-After, so nothing can find the
    // daemon half-made (no admin yet, the CLI not yet logged in). Only the daemon's own first
    // login, carrying a token nobody else has, is let through.
    const setupToken = Buffer.from(randomBytes(32).toString('base64url'));
    // Which daemon this is: written to daemon.json and answered on every control-plane response,
    // so the CLI of this data dir never takes another data dir's daemon (on the same port) for its own.
    const instanceId = randomBytes(16).toString('base64url');
    let app: App | null = null;
    const isSetupRequest = (req: http.IncomingMessage) => {
      const given = req.headers[SETUP_HEADER];
      return typeof given === 'string' && given.length === setupToken.length && timingSafeEqual(Buffer.from(given), setupToken);
    };
    let handler: http.RequestListener = (req, res) => (app && isSetupRequest(req) ? app.callback(req, res) : answerStarting(res, instanceId));
    const http1 = await steps.run('listen', () => listenHttp(config, (req, res) => handler(req, res), () => app, logger), (h) => h.close());
    const { server } = http1;
    const port = (server.address() as AddressInfo).port;
    const url = urlFor(config.host, port);
    const baseUrl = config.baseUrl ?? url;

    // Only now, with the store read and the port bound, may the start write. For a store that
    // exists, everything up to recordPid() only reads, so a start refused for a key that does not
    // open the store, or a port in use, leaves every file as it found it.
    const keychain = opts.keychain ?? osKeychain;
    const sealing = await steps.run('master key', async () => {
      const found = await storeKeyFor(config, repos, keychain);
      if (found.local?.notice) await notify(`svc: ${found.local.notice}`);
      return found;
    });
    const box = new SecretBox(sealing.key);
    const releaseSetup = await steps.run('first-start hold', () => backend.holdSetup(checkpoint), (release) => release());
    const { sessionKeys, master, cliBox } = await steps.run('key check', async () => {
      const meta = await initMeta(repos, box, sealing.stored, clock);
      // What seals the CLI's login on this machine: the store's key, or on a team replica one of its own.
      const local = sealing.local ?? (await replicaKey(config.dataDir, keychain));
      if (!sealing.local && local.notice) await notify(`svc: ${local.notice}`);
      await lock.recordPid();
      return { sessionKeys: JSON.parse(box.open('meta', 'session_keys', meta.session_keys)) as string[], master: local, cliBox: sealing.local ? box : new SecretBox(local.key) };
    });
    // The CLI's socket is a file in the data dir too, so it comes once the start may write. It is
    // closed before the server's own close, which then waits for its connections as for any other.
    const forCli = await steps.run('CLI socket', () => listenForCli(server, config.dataDir), (s) => s.close());

    // Written as soon as the port is open and the key checked, so a CLI that finds the port finds
    // the daemon (and waits out the 503s); removed by the daemon.json step above.
    const info: DaemonInfo = { pid: process.pid, url, base_url: baseUrl, version: VERSION, key_backend: master.backend, started_at: new Date().toISOString(), instance: instanceId, socket: forCli.path };
    await steps.run('write daemon.json', () => infoFile.write(info));

    const deps: AppDeps = { config, repos, box, clock, logger, baseUrl: () => baseUrl, instanceId, localLoginProof: cliBox.derive(LOCAL_LOGIN_LABEL) };
    // written out before the store closes (the app's own close does it first; a second close does nothing)
    const activityBounds = { retentionDays: config.activityRetentionDays, maxEvents: config.activityMaxEvents };
    const activity = await steps.run('activity', () => backend.openActivity(activityBounds, clock, logger), (a) => a.close());
    // Command servers: what a previous svc left running is ended first; at a stop every child goes
    // (after the app's close, before the HTTP server's wait for requests, so none waits on a child).
    const supervisor = await steps.run('command servers', () => startCommandServers(config, logger, clock), (s) => s.stopAll());
    const wired = await steps.run('app', async () => (app = await createApp(deps, { sessionKeys, port, activity, supervisor })), (w) => w.close());

    const initialAdminPassword = await steps.run('first admin', async () => {
      const password = await firstAdmin(wired, {
        login: (username, pw) => loginCli(url, setupToken.toString(), username, pw, backend.lastWriteError),
        saveLogin: (cookie) => saveCliSession(config.dataDir, master.backend, cliBox, cookie),
        notify,
        checkpoint,
      });
      await releaseSetup();
      return password;
    });
    await steps.run('idle memory', () => reduceMemoryWhenIdle({ idleMs: IDLE_MEMORY_MS, served: http1.served }), (stopReducing) => stopReducing());
    handler = wired.callback;
    logger.info({ url, baseUrl, dataDir: config.dataDir, version: VERSION, keyBackend: master.backend }, 'svc listening');

    let closing: Promise<void> | null = null;
    const daemon: Daemon = {
      url,
      baseUrl,
      port,
      get store(): Store {
        if (!backend.store) throw new Error('a team server keeps no file store: its data is reached through deps.repos');
        return backend.store;
      },
      storeKind: backend.kind,
      activity,
      app: wired,
      deps,
      keyBackend: master.backend,
      initialAdminPassword,
      close: () => (closing ??= steps.stop().then(() => logger.info('svc stopped'))),
    };
    const onFatal = opts.onFatal ?? (() => process.exit(1));
    stopForFatal = (err) => void daemon.close().finally(() => onFatal(err));
    return daemon;
  } catch (err) {
    await steps.stop();
    throw err;
  }
}
