import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { CsrfSigner } from '../../ports/csrf-signer.js';

const NONCE_BYTES = 16;

/**
 * Signed double-submit CSRF tokens bound to a session (OWASP): `<nonce>.<signature>`, the
 * signature being HMAC-SHA256 over the length-prefixed nonce and the access token's `jti`, under a
 * key derived from SECRET_KEY (HKDF, so it never equals the JWT key). A token issued for one
 * session does not verify for another.
 */
export class CsrfTokens implements CsrfSigner {
  private readonly key: Buffer;

  constructor(secretKey: string) {
    this.key = Buffer.from(
      hkdfSync('sha256', Buffer.from(secretKey, 'utf8'), Buffer.alloc(0), 'urlshortener csrf v1', 32),
    );
  }

  issue(jti: string): string {
    const nonce = randomBytes(NONCE_BYTES).toString('base64url');
    return `${nonce}.${this.signature(nonce, jti)}`;
  }

  /** Whether `token` was issued by this key for the session `jti`. */
  verify(token: string, jti: string): boolean {
    const dot = token.indexOf('.');
    if (dot <= 0 || dot !== token.lastIndexOf('.')) return false;
    const nonce = token.slice(0, dot);
    const given = Buffer.from(token.slice(dot + 1), 'ascii');
    const expected = Buffer.from(this.signature(nonce, jti), 'ascii');
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  private signature(nonce: string, jti: string): string {
    // Length prefixes keep (nonce, jti) pairs from running into each other.
    const message = `${nonce.length}!${nonce}!${jti.length}!${jti}`;
    return createHmac('sha256', this.key).update(message).digest('base64url');
  }
}
