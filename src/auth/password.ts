import { randomBytes, timingSafeEqual } from 'node:crypto';
import { type ChildProcess, fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const N = 16384;
const r = 8;
const p = 1;
const KEYLEN = 32;
const MAXMEM = 64 * 1024 * 1024;

/*
 * scrypt runs in a helper process of its own, synchronously there, started at the first hash and
 * ended once it has been idle for `idleMs` (5 s). Each hash needs a 16 MiB buffer, and glibc keeps what
 * a thread freed in that thread's malloc arena: run async in libuv's thread pool, every pool
 * thread kept its own buffer (a few logins left the daemon 64 MiB larger for good); in a worker
 * thread, its isolate and arena stayed too (about 40 MiB, and 17 MiB once the worker ended).
 * A process hands all of it back when it exits. The event loop never waits; a login after an
 * idle spell pays for the start of the helper (tens of milliseconds, on a path that costs a
 * scrypt anyway, the same for a known user and the decoy).
 */
let idleMs = 5_000;
/**
 * How long one hash may take before its helper counts as hung (scrypt at these settings takes
 * tens of milliseconds): the helper is killed, what it owed fails, and the next hash gets a new one,
 * so one stuck helper never holds every login.
 */
let hashTimeoutMs = 10_000;

/**
 * The compiled helper beside this module. Run from the sources (the tests), this module is a .ts
 * file: the helper is the build's, which the test command makes first.
 */
function helperPath(): string {
  const here = fileURLToPath(import.meta.url);
  const compiled = here.endsWith('.ts') ? here.replace(`${path.sep}src${path.sep}`, `${path.sep}dist${path.sep}`) : here;
  return path.join(path.dirname(compiled), 'scrypt-helper.js');
}

interface Pending {
  resolve: (key: Buffer) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

/** One helper process and the hashes it owes: a helper that ends fails its own, never a newer one's. */
interface Helper {
  child: ChildProcess;
  waiting: Map<number, Pending>;
  idle: NodeJS.Timeout | null;
  /** killed for not answering in time */
  hung?: boolean;
}

let current: Helper | null = null;
let nextId = 0;

/** Neither an idle helper nor its channel may keep a CLI command or a stopping daemon alive. */
function holdOpen(child: ChildProcess, hold: boolean): void {
  const channel = child.channel as { ref(): void; unref(): void } | undefined;
  if (hold) {
    child.ref();
    channel?.ref();
  } else {
    child.unref();
    channel?.unref();
  }
}

function scryptHelper(): Helper {
  if (current) return current;
  // No inherited flags (a profiler, an inspector): the helper is only a hashing loop.
  const child = fork(helperPath(), [], { execArgv: ['--max-semi-space-size=1'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'], serialization: 'advanced', env: { ...process.env, NODE_OPTIONS: '' } });
  const helper: Helper = { child, waiting: new Map(), idle: null };
  const failAll = (err: Error) => {
    if (current === helper) current = null;
    if (helper.idle) clearTimeout(helper.idle);
    for (const pending of helper.waiting.values()) {
      clearTimeout(pending.timer);
      pending.reject(err);
    }
    helper.waiting.clear();
  };
  child.on('message', (m: { id: number; key?: Uint8Array; error?: string }) => {
    const pending = helper.waiting.get(m.id);
    helper.waiting.delete(m.id);
    if (helper.waiting.size === 0) {
      holdOpen(child, false);
      helper.idle = setTimeout(() => {
        if (helper.waiting.size > 0) return;
        if (current === helper) current = null;
        child.disconnect();
      }, idleMs);
      helper.idle.unref();
    }
    if (!pending) return;
    clearTimeout(pending.timer);
    if (m.error !== undefined || !m.key) pending.reject(new Error(m.error ?? 'scrypt failed'));
    else pending.resolve(Buffer.from(m.key.buffer, m.key.byteOffset, m.key.byteLength));
  });
  child.on('error', failAll);
  child.on('exit', () => failAll(new Error(helper.hung ? `the scrypt helper did not answer within ${hashTimeoutMs} ms and was replaced` : 'the scrypt helper stopped')));
  holdOpen(child, false);
  current = helper;
  return helper;
}

function derive(password: string, salt: Buffer, n: number, rr: number, pp: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const helper = scryptHelper();
    if (helper.idle) clearTimeout(helper.idle);
    helper.idle = null;
    const id = ++nextId;
    const timer = setTimeout(() => {
      // hung: no answer in far longer than a hash takes. It goes, and fails what it owed.
      if (current === helper) current = null;
      helper.hung = true;
      helper.child.kill('SIGKILL');
    }, hashTimeoutMs);
    timer.unref();
    helper.waiting.set(id, { resolve, reject, timer });
    holdOpen(helper.child, true);
    helper.child.send({ id, password: password.normalize('NFC'), salt, n, r: rr, p: pp, keylen: KEYLEN, maxmem: MAXMEM }, (err) => {
      if (!err || !helper.waiting.delete(id)) return;
      reject(err);
    });
  });
}

/** The cost of new hashes: N, unless a test of something else lowered it (setScryptCost). */
let cost = N;

/** `scrypt$N$r$p$salt$hash`, so the cost can be raised later without breaking old hashes. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, cost, r, p);
  return `scrypt$${cost}$${r}$${p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, rr, pp, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const actual = await derive(password, Buffer.from(salt, 'base64url'), Number(n), Number(rr), Number(pp));
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

let decoy: Promise<string> | null = null;
/**
 * A hash of a random password, spent on unknown usernames so timing does not reveal which exist.
 * Made at the first login of any kind, so no login's time depends on whether its user exists,
 * and a daemon nobody logs in to never starts the scrypt helper.
 */
export function decoyHash(): Promise<string> {
  // a failed hash (the worker died) is tried again at the next login, not kept as a failure
  return (decoy ??= hashPassword(randomBytes(16).toString('hex')).catch((err: unknown) => {
    decoy = null;
    throw err;
  }));
}

/**
 * The scrypt cost (N) of new hashes in this process. Only the system tests lower it, for the
 * daemons they run in their own process: they hash a few hundred passwords a run, each at the
 * real cost a twentieth of a second of CPU, to test what is around the hash. Nothing a user can
 * reach (no option, no variable) sets it; password.test.ts holds the real cost.
 */
export function setScryptCost(n: number): void {
  if (!Number.isInteger(Math.log2(n)) || n < 1024 || n > N) throw new RangeError('the scrypt cost is a power of 2 from 1024 to the default');
  cost = n;
}

/** How long the helper may sit idle (tests shorten it). */
export function setScryptIdleMs(ms: number): void {
  idleMs = ms;
}

/** How long one hash may take before its helper is replaced (tests shorten it). */
export function setScryptHashTimeoutMs(ms: number): void {
  hashTimeoutMs = ms;
}

/** The helper's pid while it runs (tests watch it come and go). */
export function scryptHelperPid(): number | undefined {
  return current?.child.pid;
}

export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}
