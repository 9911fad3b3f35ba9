export type CsrfFailureReason = 'missing_header' | 'token_mismatch' | 'invalid_signature';
/** `throttled`: refused (429) because the client address has too many recent failures. */
export type LoginFailureReason = 'invalid_credentials' | 'locked' | 'throttled';

/**
 * Security events worth an alert: refused CSRF checks, refused logins, lockouts. Every adapter
 * passes `test/contract/security-metrics.contract.test.ts`.
 *
 * @example
 *   metrics.loginFailure('invalid_credentials');
 *   if (count === maxAttempts) metrics.lockout();
 */
export interface SecurityMetrics {
  csrfFailure(reason: CsrfFailureReason): void;
  loginFailure(reason: LoginFailureReason): void;
  /** An account (or unknown username) has just reached the failed-attempt threshold. */
  lockout(): void;
}
