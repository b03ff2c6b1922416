import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import type { SecretBox } from '../store/crypto.js';
import { SEAL_KINDS } from '../store/seal-kinds.js';
import type { Repositories } from '../store/repositories.js';

const KIND = SEAL_KINDS.signingKeys;

export interface SigningKeys {
  /** private JWKs for oidc-provider */
  keys: JWK[];
  /** the public halves, for the resource side */
  publicKeys: JWK[];
}

async function generate(alg: 'ES256' | 'RS256'): Promise<JWK> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true, ...(alg === 'RS256' ? { modulusLength: 2048 } : {}) });
  return { ...(await exportJWK(privateKey)), kid: randomUUID(), alg, use: 'sig' };
}

const publicOf = ({ d, p, q, dp, dq, qi, ...pub }: JWK): JWK => pub;

const sealed = (box: SecretBox, keys: JWK[]) => box.seal(KIND, 'jwks', JSON.stringify(keys));
const opened = (box: SecretBox, value: string) => JSON.parse(box.open(KIND, 'jwks', value)) as JWK[];
const signingKeys = (keys: JWK[]): SigningKeys => ({ keys, publicKeys: keys.map(publicOf) });

/**
 * The access-token key (ES256), created on the first start and kept sealed in the store with
 * the other signing keys. The ID-token key is not made here: see withIdTokenKey.
 */
export async function loadSigningKeys(repos: Repositories, box: SecretBox): Promise<SigningKeys> {
  for (;;) {
    const stored = await repos.signingKeys.get();
    if (stored) return signingKeys(opened(box, stored));
    const keys = [await generate('ES256')];
    if (await repos.signingKeys.setIfUnchanged(undefined, sealed(box, keys))) return signingKeys(keys);
  }
}

/**
 * The signing keys with an RS256 key for ID tokens, which OpenID Connect requires a provider to
 * offer. It is made the first time the authorization server is built rather than at the first
 * start: an RSA key takes tens of milliseconds of CPU to make (more than the rest of a first
 * start's own work), and a daemon whose apps only use API keys never needs it. Of two replicas
 * adding one at once, the second takes the first's, so every replica publishes the same keys.
 */
export async function withIdTokenKey(repos: Repositories, box: SecretBox): Promise<SigningKeys> {
  for (;;) {
    const stored = await repos.signingKeys.get();
    const keys = stored ? opened(box, stored) : [];
    if (keys.some((k) => k.alg === 'RS256')) return signingKeys(keys);
    const next = [...(keys.length ? keys : [await generate('ES256')]), await generate('RS256')];
    if (await repos.signingKeys.setIfUnchanged(stored, sealed(box, next))) return signingKeys(next);
  }
}
