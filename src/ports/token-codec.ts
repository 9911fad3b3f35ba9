import type { Role } from '../domain/user.js';

/** What a session token says (spec §5.3 and the design's "Tokens and CSRF"). */
export interface TokenClaims {
  /** Username. */
  readonly sub: string;
  /** Expiry, seconds since the epoch (UTC). */
  readonly exp: number;
  /** Issued at, seconds since the epoch. */
  readonly iat: number;
  /** Token id: what logout puts on the denylist. */
  readonly jti: string;
  /** User id. */
  readonly uid: number;
  readonly role: Role;
}

/**
 * Turns session claims into a signed token and back. `verify` answers only for a token this codec
 * signed that has not expired by its clock; anything else (tampered, foreign, expired, malformed)
 * is undefined, never an exception. Every adapter passes `test/contract/token-codec.contract.test.ts`.
 *
 * @example
 *   const token = codec.sign({ sub: 'alice', uid: 1, role: 'user', jti, iat: now, exp: now + 1800 });
 *   codec.verify(token)?.sub; // 'alice'
 */
export interface TokenCodec {
  sign(claims: TokenClaims): string;
  /** The claims of a genuine, unexpired token; undefined for anything else. */
  verify(token: string): TokenClaims | undefined;
}
