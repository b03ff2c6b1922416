import { randomBytes, timingSafeEqual } from 'node:crypto';
import { Worker } from 'node:worker_threads';

const N = 16384;
const r = 8;
const p = 1;
const KEYLEN = 32;
const MAXMEM = 64 * 1024 * 1024;

/*
 * scrypt runs in one worker thread of its own, synchronously there. Run async in libuv's thread
 * pool instead, each of its threads keeps its own 16 MiB scrypt buffer in its malloc arena after
 * the hash (glibc raises its mmap threshold after the first free): a few logins left the daemon
 * 64 MiB larger for good. One thread keeps one buffer, reused; the event loop never waits.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { scryptSync } = require('node:crypto');
parentPort.on('message', ({ id, password, salt, n, r, p, keylen, maxmem }) => {
  try {
    parentPort.postMessage({ id, key: scryptSync(password, salt, keylen, { N: n, r, p, maxmem }) });
  } catch (err) {
    parentPort.postMessage({ id, error: String((err && err.message) || err) });
  }
});`;

let worker: Worker | null = null;
let nextId = 0;
const waiting = new Map<number, { resolve: (key: Buffer) => void; reject: (err: Error) => void }>();

function scryptWorker(): Worker {
  if (worker) return worker;
  const w = new Worker(WORKER_SOURCE, { eval: true });
  const failAll = (err: Error) => {
    if (worker === w) worker = null;
    for (const pending of waiting.values()) pending.reject(err);
    waiting.clear();
  };
  w.on('message', (m: { id: number; key?: Uint8Array; error?: string }) => {
    const pending = waiting.get(m.id);
    waiting.delete(m.id);
    // idle: it must not keep a CLI command or a stopping daemon alive
    if (waiting.size === 0) w.unref();
    if (!pending) return;
    if (m.error !== undefined || !m.key) pending.reject(new Error(m.error ?? 'scrypt failed'));
    else pending.resolve(Buffer.from(m.key.buffer, m.key.byteOffset, m.key.byteLength));
  });
  w.on('error', failAll);
  w.on('exit', () => failAll(new Error('the scrypt worker stopped')));
  w.unref();
  worker = w;
  return w;
}

function derive(password: string, salt: Buffer, n: number, rr: number, pp: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const w = scryptWorker();
    const id = ++nextId;
    waiting.set(id, { resolve, reject });
    w.ref();
    w.postMessage({ id, password: password.normalize('NFC'), salt, n, r: rr, p: pp, keylen: KEYLEN, maxmem: MAXMEM });
  });
}

/** `scrypt$N$r$p$salt$hash`, so the cost can be raised later without breaking old hashes. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, N, r, p);
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
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
 * and a daemon nobody logs in to never starts the scrypt worker.
 */
export function decoyHash(): Promise<string> {
  // a failed hash (the worker died) is tried again at the next login, not kept as a failure
  return (decoy ??= hashPassword(randomBytes(16).toString('hex')).catch((err: unknown) => {
    decoy = null;
    throw err;
  }));
}

export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}
