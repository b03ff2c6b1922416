import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretBox } from '../store/crypto.js';
import { inMemoryRepositories } from '../store/store-repositories.js';
import { loadSigningKeys, withIdTokenKey } from './keys.js';

describe('signing keys', () => {
  it('a first start makes only the access-token key; the authorization server adds the ID-token key once, and keeps it', async () => {
    const repos = await inMemoryRepositories();
    const box = new SecretBox(randomBytes(32));
    const started = await loadSigningKeys(repos, box);
    expect(started.keys.map((k) => k.alg)).toEqual(['ES256']);
    // the public halves only
    expect(started.publicKeys[0]).not.toHaveProperty('d');

    const built = await withIdTokenKey(repos, box);
    expect(built.keys.map((k) => k.alg)).toEqual(['ES256', 'RS256']);
    // the access-token key is the one the Bearer check already holds
    expect(built.keys[0]).toEqual(started.keys[0]);
    expect(built.publicKeys[1]).not.toHaveProperty('d');
    expect(built.publicKeys[1]).not.toHaveProperty('p');

    const again = await withIdTokenKey(repos, box);
    expect(again.keys).toEqual(built.keys);
    expect((await loadSigningKeys(repos, box)).keys).toEqual(built.keys);
  });

  it('of two builds adding the ID-token key at once, both end with the same keys', async () => {
    const repos = await inMemoryRepositories();
    const box = new SecretBox(randomBytes(32));
    await loadSigningKeys(repos, box);
    const [a, b] = await Promise.all([withIdTokenKey(repos, box), withIdTokenKey(repos, box)]);
    expect(a.keys).toEqual(b.keys);
    expect(JSON.parse(box.open('oauth_signing_keys', 'jwks', (await repos.signingKeys.get())!))).toEqual(a.keys);
  });
});
