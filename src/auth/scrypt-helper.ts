/**
 * The scrypt helper process (see password.ts for why scrypt runs in a process of its own): it
 * hashes each message it is sent, synchronously, and answers with the key or the error. It ends
 * when its parent lets it go (disconnect) or goes away. Forked from the compiled file, so it is
 * type-checked and linted like the rest.
 */
import { scryptSync } from 'node:crypto';

export interface HashRequest {
  id: number;
  password: string;
  salt: Uint8Array;
  n: number;
  r: number;
  p: number;
  keylen: number;
  maxmem: number;
}

export type HashAnswer = { id: number; key: Uint8Array } | { id: number; error: string };

/** One request's answer; never throws. */
export function answer({ id, password, salt, n, r, p, keylen, maxmem }: HashRequest): HashAnswer {
  try {
    return { id, key: scryptSync(password, Buffer.from(salt), keylen, { N: n, r, p, maxmem }) };
  } catch (err) {
    return { id, error: String((err as Error)?.message ?? err) };
  }
}

// Run as a forked process (it has an IPC channel): serve until let go.
if (process.send) {
  process.on('message', (m: HashRequest) => process.send!(answer(m)));
  process.on('disconnect', () => process.exit(0));
}
