/**
 * Issues CSRF tokens bound to one session and checks that a token belongs to it (the signed
 * double-submit pattern of spec §5.4). A token issued for one session never verifies for another,
 * nor under another key. Every adapter passes `test/contract/csrf-signer.contract.test.ts`.
 *
 * @example
 *   const token = csrf.issue(claims.jti);
 *   csrf.verify(token, claims.jti); // true
 *   csrf.verify(token, otherJti); // false
 */
export interface CsrfSigner {
  /** A new token for the session `sessionId` (a fresh one at every call). */
  issue(sessionId: string): string;
  /** Whether `token` was issued by this signer for `sessionId`. */
  verify(token: string, sessionId: string): boolean;
}
