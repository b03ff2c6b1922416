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

/**
 * The authorization server's signing keys: ES256 for access tokens (first, so it is the default)
 * and RS256 for ID tokens, created on first start and kept sealed in the store.
 */
export async function loadSigningKeys(repos: Repositories, box: SecretBox): Promise<SigningKeys> {
  const sealed = await repos.signingKeys.get();
  let keys: JWK[];
  if (sealed) {
    keys = JSON.parse(box.open(KIND, 'jwks', sealed)) as JWK[];
  } else {
    keys = [await generate('ES256'), await generate('RS256')];
    await repos.signingKeys.set(box.seal(KIND, 'jwks', JSON.stringify(keys)));
  }
  return { keys, publicKeys: keys.map(publicOf) };
}
