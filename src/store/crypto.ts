import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';

/** What every sealed value starts with. */
export const SEALED_PREFIX = 'sealed:v1:';

/** Whether a stored value is a sealed one (whatever key sealed it). */
export const isSealed = (value: unknown): value is string => typeof value === 'string' && value.startsWith(SEALED_PREFIX);

/**
 * AES-256-GCM over every secret field: a fresh 96-bit nonce per value and the record's kind and
 * id as associated data, so a sealed value copied onto another record does not open.
 */
export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('master key must be 32 bytes');
  }

  seal(kind: string, id: string, plaintext: string): string {
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce);
    cipher.setAAD(Buffer.from(`${kind}\0${id}`, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const tag = cipher.getAuthTag();
    return `${SEALED_PREFIX}${nonce.toString('base64url')}.${body.toString('base64url')}.${tag.toString('base64url')}`;
  }

  /** A value derived from the master key for one purpose (HMAC-SHA256 of the label), base64url. */
  derive(label: string): string {
    return createHmac('sha256', this.key).update(label, 'utf8').digest('base64url');
  }

  open(kind: string, id: string, sealed: string): string {
    if (!sealed.startsWith(SEALED_PREFIX)) throw new Error('not a sealed value');
    const [nonce, body, tag, ...rest] = sealed.slice(SEALED_PREFIX.length).split('.');
    if (!nonce || body === undefined || !tag || rest.length) throw new Error('malformed sealed value');
    const nonceBytes = Buffer.from(nonce, 'base64url');
    const tagBytes = Buffer.from(tag, 'base64url');
    // GCM would accept a tag cut to 4 bytes, which a forger could guess: only the whole 16 are taken
    if (nonceBytes.length !== 12 || tagBytes.length !== 16) throw new Error('malformed sealed value');
    const decipher = createDecipheriv('aes-256-gcm', this.key, nonceBytes, { authTagLength: 16 });
    decipher.setAAD(Buffer.from(`${kind}\0${id}`, 'utf8'));
    decipher.setAuthTag(tagBytes);
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
  }
}

