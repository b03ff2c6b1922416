import { readFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { ConfigError, type ConfigFlags, defaultDataDir, resolveConfig } from '../config.js';
import type { DaemonInfo } from '../daemon.js';
import { AppError, type ErrorBody } from '../errors.js';
import { checkDataDir, checkPrivateDir, DAEMON_FILE, localSocketPlace, SOCKET_FILE, UnsafeDataDirError, UnsafeSocketDirError } from '../daemon-info.js';
import { isDataDirLocked } from '../store/lock.js';
import { loadCliSession } from './credentials.js';
import { CliError, EXIT } from './errors.js';

export type ClientOptions = ConfigFlags;

/** The headers of an answer: what the commands read of them. */
export interface AnswerHeaders {
  get(name: string): string | null;
  getSetCookie(): string[];
}

/** An answer read whole. */
interface Answer {
  status: number;
  ok: boolean;
  headers: AnswerHeaders;
  text: string;
}

/**
 * One request over node:http, on the daemon's Unix socket. Not fetch: its first use loads Node's
 * bundled HTTP client, tens of milliseconds of a command that takes little more.
 */
function call(socketPath: string, pathname: string, method: string, headers: Record<string, string>, body: string | undefined, timeoutMs: number): Promise<Answer> {
  return new Promise<Answer>((resolve, reject) => {
    const sent = { ...headers, ...(body === undefined ? {} : { 'Content-Length': String(Buffer.byteLength(body)) }) };
    const req = http.request({ socketPath, path: pathname, method, headers: sent, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        // an answer of the daemon is small; anything else on its port gets no more memory than this
        if ((size += c.length) > 64 * 1024 * 1024) return void req.destroy(new Error('answer too large'));
        chunks.push(c);
      });
      res.on('error', reject);
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        const raw = res.headers;
        resolve({
          status,
          ok: status >= 200 && status < 300,
          headers: {
            get: (name) => {
              const v = raw[name.toLowerCase()];
              return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
            },
            getSetCookie: () => raw['set-cookie'] ?? [],
          },
          text: Buffer.concat(chunks).toString('utf8'),
        });
      });
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Talks to the running daemon of its data dir with the CLI's session, like `docker` does: over the
 * Unix socket in the data dir (see localSocketPlace), never over TCP. Whatever holds the daemon's
 * TCP port (a process that took it after a crash) never sees the CLI's cookie or what it sends.
 */
/** How long a command waits for a starting daemon before it says so. */
const WAIT_HINT_MS = 2_000;

export class DaemonClient {
  private cookie: string | null | undefined;

  /** whether the person was told the command waits for a starting daemon */
  private toldWaiting = false;

  private constructor(
    readonly dataDir: string,
    private daemonInfo: DaemonInfo | null,
    private readonly env: NodeJS.ProcessEnv = process.env,
    /** where a hint goes (stderr): that the command waits for a daemon still starting */
    private readonly hint: (text: string) => void = () => undefined,
  ) {}

  /**
   * Said once, when a command has waited WAIT_HINT_MS for a daemon that is starting (its first
   * start sets up keys and the admin, which may take several seconds): a minute of silence reads
   * as a hang.
   */
  private waiting(since: number): void {
    if (this.toldWaiting || Date.now() - since < WAIT_HINT_MS) return;
    this.toldWaiting = true;
    this.hint(`svc: the daemon of ${this.dataDir} is still starting; waiting for it (up to a minute)...\n`);
  }

  /** where the daemon serves browsers and apps: shown to the person, never used to send */
  get url(): string {
    return this.daemonInfo?.url ?? '';
  }

  /** The daemon's daemon.json, as read when this client connected (or once a starting daemon wrote it). */
  get info(): DaemonInfo | null {
    return this.daemonInfo;
  }

  /**
   * A daemon that holds the data dir's lock but has not written daemon.json yet is starting (its
   * port may already accept): wait for it, as for its 503s, rather than say none runs.
   */
  private async waitForStartingDaemon(giveUpAt: number): Promise<DaemonInfo | null> {
    const since = Date.now();
    while (Date.now() < giveUpAt && (await isDataDirLocked(this.dataDir))) {
      const info = await readDaemonInfo(this.dataDir);
      if (info) return info;
      this.waiting(since);
      await new Promise((r) => setTimeout(r, 100));
    }
    return readDaemonInfo(this.dataDir);
  }

  static async connect(flags: ClientOptions, env: NodeJS.ProcessEnv = process.env, hint?: (text: string) => void): Promise<DaemonClient> {
    let config;
    try {
      config = resolveConfig(flags, env);
    } catch (err) {
      if (err instanceof ConfigError) throw usage(err.message);
      throw err;
    }
    // A daemon.json is believed only in a data dir of this user's own (see checkDataDir).
    await requireOwnDataDir(config.dataDir);
    const info = await readDaemonInfo(config.dataDir);
    return new DaemonClient(config.dataDir, info, env, hint);
  }

  /**
   * The daemon's socket, as its daemon.json names it (a file only this user can write), checked
   * to be one of the places a daemon of this data dir puts it, in a folder private to this user.
   */
  private async socketPath(info: DaemonInfo): Promise<string> {
    const socket = info.socket;
    if (!socket) throw new CliError(`The svc daemon of ${this.dataDir} is from an older svc that has no local socket; restart it (svc serve).`);
    const expected = localSocketPlace(this.dataDir, this.env);
    const sameName = path.basename(socket) === SOCKET_FILE ? path.dirname(socket) === this.dataDir : path.basename(socket) === path.basename(expected.path);
    if (!path.isAbsolute(socket) || !sameName) throw this.notOurs(` (its daemon.json names a socket outside it: ${socket})`);
    try {
      await checkPrivateDir(path.dirname(socket));
    } catch (err) {
      throw new CliError(err instanceof UnsafeSocketDirError ? err.message : `Cannot use the svc socket ${socket}: ${(err as Error).message}`);
    }
    return socket;
  }

  /** The CLI talks only to the daemon of its own data dir (decisions: Configuration), never to whatever answers on the port. */
  private notOurs(why: string): CliError {
    return new CliError(`No svc daemon runs for the data dir ${this.dataDir}${why}. Start one with \`svc serve\`${this.dataDir === defaultDataDir(this.env) ? '' : ' (with the same --data-dir or SVC_HOME)'}.`);
  }

  async request<T>(method: string, pathname: string, body?: unknown, opts: { auth?: boolean; headers?: Record<string, string> } = {}): Promise<{ status: number; body: T; headers: AnswerHeaders }> {
    // A daemon still starting (first-start setup) answers 503 `starting`: wait for it (asking
    // again every 250 ms, sooner than its Retry-After, as it is local), up to a minute, so that
    // `svc serve & ... svc users add` works once the port is open. The CLI's login is read again
    // each time: the first start writes it during setup.
    const since = Date.now();
    const giveUpAt = since + 60_000;
    let res: Answer;
    let parsed: unknown;
    let reread = false;
    for (;;) {
      ({ res, parsed } = await this.send(method, pathname, body, opts));
      const sentCookie = this.cookie; // what send() used (null: no saved login)
      const code = (parsed as ErrorBody | undefined)?.error?.code;
      const starting = res.status === 503 && code === 'starting';
      // The saved login may have changed since this client read it: a first start writes it just
      // before it stops answering `starting`, and `svc login` replaces it (after `svc users passwd`
      // ended the old session) while a long-lived command such as `svc review` runs. Read it once
      // more; if it is another login, ask again with it.
      if (res.status === 401 && code === 'login_required' && opts.auth !== false && !reread) {
        reread = true;
        const fresh = await loadCliSession(this.dataDir);
        this.cookie = fresh;
        if (fresh && fresh !== sentCookie) continue;
      }
      if (!starting || Date.now() >= giveUpAt) break;
      this.waiting(since);
      await new Promise((r) => setTimeout(r, 250));
      this.cookie = undefined;
    }
    if (!res.ok) {
      const e = (parsed as ErrorBody | undefined)?.error;
      throw AppError.fromWire(res.status, e?.type ?? 'server_error', e?.code ?? 'http_error', e?.message ?? `HTTP ${res.status}`, e?.param);
    }
    return { status: res.status, body: parsed as T, headers: res.headers };
  }

  private async send(method: string, pathname: string, body: unknown, opts: { auth?: boolean; headers?: Record<string, string> }): Promise<{ res: Answer; parsed: unknown }> {
    // No daemon.json and nobody holding the lock: no daemon of this data dir, whatever may listen on the default port.
    if (!this.daemonInfo) this.daemonInfo = await this.waitForStartingDaemon(Date.now() + 60_000);
    if (!this.daemonInfo && (await isDataDirLocked(this.dataDir))) {
      throw new CliError(`The svc daemon of ${this.dataDir} is still starting after a minute (it holds the data dir but has not written daemon.json); see its output, or stop it and start it again.`);
    }
    if (!this.daemonInfo) throw this.notOurs('');
    const socket = await this.socketPath(this.daemonInfo);
    // The Host the daemon answers to (it refuses others, against DNS rebinding), as a browser
    // would send it: taken from daemon.json once it is read, also when this command waited for
    // a daemon that was still starting.
    const headers: Record<string, string> = { ...opts.headers, Accept: 'application/json', Host: new URL(this.daemonInfo.url).host };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (opts.auth !== false) {
      if (this.cookie === undefined) this.cookie = await loadCliSession(this.dataDir);
      if (this.cookie) headers.Cookie = this.cookie;
    }
    let res: Answer;
    try {
      res = await call(socket, pathname, method, headers, body === undefined ? undefined : JSON.stringify(body), 30_000);
    } catch {
      throw this.notOurs(` (nothing answers at ${socket}; it last listened at ${this.url})`);
    }
    const text = res.text;
    let parsed: unknown = undefined;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new CliError(`Unexpected answer from ${this.url}${pathname} (HTTP ${res.status}).`);
      }
    }
    return { res, parsed };
  }
}

export async function readDaemonInfo(dataDir: string): Promise<DaemonInfo | null> {
  try {
    const info = JSON.parse(await readFile(path.join(dataDir, DAEMON_FILE), 'utf8')) as DaemonInfo;
    return typeof info.url === 'string' ? info : null;
  } catch {
    return null;
  }
}

export function usage(message: string): CliError {
  return new CliError(message, EXIT.usage);
}

/**
 * Refuses a data dir that could be another user's (a link, someone else's, writable by others)
 * before the CLI believes or changes anything in it, as `svc serve` does; a missing one passes
 * (each command says what it needs of it).
 */
export async function requireOwnDataDir(dataDir: string): Promise<void> {
  try {
    await checkDataDir(dataDir, false);
  } catch (err) {
    throw new CliError(err instanceof UnsafeDataDirError ? err.message : `Cannot use the data dir ${dataDir}: ${(err as Error).message}`);
  }
}
