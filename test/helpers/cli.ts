/** Drives the real `svc` binary (bin/svc.js -> dist/) as a user or a script would. */
import { existsSync, readdirSync, statSync } from 'node:fs';
import http from 'node:http';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa, type ResultPromise } from 'execa';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BIN = path.join(REPO, 'bin', 'svc.js');

/**
 * The spawned CLI runs dist/, so a build older than the sources would test stale code: refuse
 * that with the command that fixes it (`npm test` always builds first; a direct `npx vitest` may not).
 */
let freshChecked = false;
export function requireFreshDist(): void {
  if (freshChecked) return;
  const newest = (dir: string): number =>
    readdirSync(dir, { withFileTypes: true }).reduce((max, e) => {
      const p = path.join(dir, e.name);
      return Math.max(max, e.isDirectory() ? newest(p) : /\.tsx?$/.test(e.name) && !/\.test\.tsx?$/.test(e.name) ? statSync(p).mtimeMs : 0);
    }, 0);
  const built = path.join(REPO, 'dist', 'cli', 'main.js');
  if (!existsSync(built) || statSync(built).mtimeMs < newest(path.join(REPO, 'src'))) {
    throw new Error('dist/ is older than src/: the CLI tests run dist/, so run `npm run build` first (npm test does).');
  }
  freshChecked = true;
}

export interface CliResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** The caller's environment less anything that would point the CLI at another daemon or keychain. */
export function cleanEnv(extra: Record<string, string | undefined> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k.startsWith('SVC_') || k === 'NODE_OPTIONS') continue;
    env[k] = v;
  }
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

/**
 * One `svc ...` run. stdin is closed (/dev/null) unless `input` is given; output is a pipe, so the
 * CLI sees no TTY. Never throws on a non-zero exit: the exit code is part of what is tested.
 */
export async function runSvc(args: string[], opts: { env: Record<string, string>; input?: string; timeoutMs?: number }): Promise<CliResult> {
  requireFreshDist();
  const r = await execa('node', [BIN, ...args], {
    cwd: REPO,
    env: opts.env,
    extendEnv: false,
    reject: false,
    stripFinalNewline: false,
    timeout: opts.timeoutMs ?? 30_000,
    ...(opts.input !== undefined ? { input: opts.input } : { stdin: 'ignore' as const }),
  });
  if (r.timedOut) throw new Error(`svc ${args.join(' ')} timed out`);
  return { exitCode: r.exitCode ?? -1, stdout: String(r.stdout), stderr: String(r.stderr) };
}

/**
 * `svc <args>` run in this process: the same command functions (src/cli), given the environment,
 * standard input and output by injection, as bin/svc.js gives them the process's own. Far cheaper
 * than a process per command; the end-to-end spawns (runSvc) stay where the process itself is
 * under test (signals, exit codes of the binary, the man page's program).
 */
export async function runSvcInProcess(
  args: string[],
  opts: { env: Record<string, string>; input?: string; tty?: { columns: number }; /** sees standard error as it is written */ onErr?: (text: string) => void },
): Promise<CliResult> {
  const { main } = await import('../../src/cli/main.js');
  let stdout = '';
  let stderr = '';
  try {
    const exitCode = await main(['node', 'svc', ...args], {
      out: (t) => void (stdout += t),
      err: (t) => {
        stderr += t;
        opts.onErr?.(t);
      },
      // a terminal of that width, as a person sees the output (tables, short ids, relative times)
      isTTY: Boolean(opts.tty),
      columns: opts.tty?.columns,
      env: opts.env,
      stdin: async () => opts.input ?? '',
    });
    return { exitCode, stdout, stderr };
  } finally {
    closeIdleCliConnections();
  }
}

/**
 * The command's connections to the daemon end with it, as they do when a real `svc` process
 * exits. Left open, the idle keep-alive connection the CLI's client (node:http's global agent)
 * keeps to the daemon's Unix socket would hold the daemon's stop for the keep-alive timeout
 * (about 4 s a daemon). Only idle sockets are closed: a request in flight is never cut.
 */
function closeIdleCliConnections(): void {
  for (const sockets of Object.values(http.globalAgent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
}

export interface ServeProcess {
  url: string;
  pid: number;
  /** everything the daemon printed on stdout so far (notices, the listening line) */
  stdout(): string;
  stderr(): string;
  /** SIGTERM, then SIGKILL if it lingers; resolves with the exit code */
  stop(): Promise<number | undefined>;
  exited: Promise<number | undefined>;
}

/** Collects a child's output and resolves once `pattern` appears on stdout (or rejects when it exits first). */
function watch(child: ResultPromise, pattern: RegExp, timeoutMs: number, what: string) {
  let out = '';
  let err = '';
  child.stdout?.setEncoding('utf8');
  child.stderr?.setEncoding('utf8');
  let exitCode: number | undefined;
  const exited = new Promise<number | undefined>((resolve) => {
    child.on('exit', (code) => {
      exitCode = code ?? undefined;
      resolve(code ?? undefined);
    });
  });
  // execa's own promise is not used: swallow its settle so nothing goes unhandled.
  (child as unknown as Promise<unknown>).catch?.(() => undefined);
  const ready = new Promise<RegExpMatchArray>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: no ${pattern} within ${timeoutMs} ms\nstdout: ${out}\nstderr: ${err}`)), timeoutMs);
    const check = () => {
      const m = out.match(pattern);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    };
    child.stdout?.on('data', (c: string) => {
      out += c;
      check();
    });
    child.stderr?.on('data', (c: string) => {
      err += c;
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code}) before ${pattern}\nstdout: ${out}\nstderr: ${err}`));
    });
  });
  ready.catch(() => undefined);
  return { ready, exited, out: () => out, err: () => err, exitCode: () => exitCode };
}

/** `svc serve --port 0 --data-dir DIR` as a child process; resolves once it prints where it listens. */
export async function startServe(dataDir: string, env: Record<string, string>, extraArgs: string[] = []): Promise<ServeProcess> {
  requireFreshDist();
  const child = execa('node', [BIN, 'serve', '--host', '127.0.0.1', '--port', '0', '--data-dir', dataDir, ...extraArgs], {
    cwd: REPO,
    env,
    extendEnv: false,
    reject: false,
    buffer: false,
    stdin: 'ignore',
    forceKillAfterDelay: 5_000,
  });
  const w = watch(child, /svc listening on (http:\/\/127\.0\.0\.1:\d+)/, 45_000, 'svc serve');
  let m: RegExpMatchArray;
  try {
    m = await w.ready;
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  const stop = async () => {
    if (w.exitCode() === undefined && child.exitCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await w.exited;
      clearTimeout(timer);
    }
    return w.exited;
  };
  return { url: m[1], pid: child.pid!, stdout: w.out, stderr: w.err, stop, exited: w.exited };
}

/** `svc serve` that is expected to fail: its exit code and output. */
export async function serveExpectingFailure(dataDir: string, env: Record<string, string>, extraArgs: string[] = []): Promise<CliResult> {
  return runSvc(['serve', '--host', '127.0.0.1', '--port', '0', '--data-dir', dataDir, ...extraArgs], { env, timeoutMs: 45_000 });
}

/** A loopback port nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Raw terminal control bytes: ESC, BEL, CSI/OSC introducers and the other C0/C1 controls but \t and \n. */
export const CONTROL_BYTES = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
