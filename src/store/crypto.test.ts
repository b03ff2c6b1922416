import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretBox } from './crypto.js';

describe('SecretBox', () => {
  const box = new SecretBox(randomBytes(32));
  const sealed = box.seal('kind', 'id', 'the secret');

  it('opens what it sealed, for the same kind and id only', () => {
    expect(box.open('kind', 'id', sealed)).toBe('the secret');
    expect(() => box.open('kind', 'other', sealed)).toThrow();
    expect(() => box.open('other', 'id', sealed)).toThrow();
    expect(() => new SecretBox(randomBytes(32)).open('kind', 'id', sealed)).toThrow();
  });

  it('refuses a tag or nonce of another length: a tag cut short would be guessable', () => {
    const [nonce, body, tag] = sealed.slice('sealed:v1:'.length).split('.');
    const tagBytes = Buffer.from(tag, 'base64url');
    for (const cut of [4, 8, 12, 15]) {
      expect(() => box.open('kind', 'id', `sealed:v1:${nonce}.${body}.${tagBytes.subarray(0, cut).toString('base64url')}`), `tag of ${cut}`).toThrow('malformed');
    }
    expect(() => box.open('kind', 'id', `sealed:v1:${Buffer.from(nonce, 'base64url').subarray(0, 8).toString('base64url')}.${body}.${tag}`)).toThrow('malformed');
    expect(() => box.open('kind', 'id', `${sealed}.extra`)).toThrow('malformed');
  });
});
