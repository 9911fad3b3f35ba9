/**
 * What a revocation revokes: `token` is a session token's `jti`. The store is keyed by kind and
 * id, so later kinds (a revoked API key, a disabled user) need no new table or adapter.
 */
export type RevocationKind = 'token';

/** Failed logins of one subject and how long until the window closes. */
export interface FailureWindow {
  readonly count: number;
  /** Milliseconds until the failures are forgotten (the lockout ends). */
  readonly ttlMs: number;
  /**
   * When the window closes (epoch ms), as the store holds it: the same for every instance that
   * reads it, whatever its clock (`ttlMs` is from the reader's clock).
   */
  readonly expiresAtMs: number;
  /**
   * Orders the subject's changes, every instance's alike: each failure counted and each clearing
   * gives a higher one than the subject's last (at least the clock's milliseconds times 1,000, so
   * a record pruned and begun again still comes after). A copy keeps the change of the highest.
   */
  readonly version: number;
}

/**
 * Security state that every instance must honour at once and that survives restarts: revocations
 * (kept until they expire) and login failures in a sliding window (lockouts). Kept in the
 * database; with Redis configured, Redis holds a fast shared copy that is rebuilt from the
 * database when it comes back empty. Expiry follows the injected clock. Every adapter passes
 * `test/contract/auth-state-store.contract.test.ts`.
 *
 * @example
 *   await store.revoke('token', claims.jti, claims.exp * 1000);
 *   if (await store.isRevoked('token', claims.jti)) reject();
 *   const { count } = await store.recordFailure('alice', 15 * 60_000); // 1, 2, 3, …
 */
export interface AuthStateStore {
  /** Revokes `kind`/`id` until `expiresAtMs` (epoch ms); revoking again keeps the later expiry. */
  revoke(kind: RevocationKind, id: string, expiresAtMs: number): Promise<void>;
  isRevoked(kind: RevocationKind, id: string): Promise<boolean>;
  /** Ends a revocation early (a re-enabled key or user). */
  lift(kind: RevocationKind, id: string): Promise<void>;
  /**
   * Counts one failure of `subject` and returns the new count; every failure moves the window's
   * end to `windowMs` from now (a sliding window), and a closed window starts again from 1. The
   * end never moves back: of two instances whose clocks differ, the one behind cannot shorten the
   * window the other set, so a later count never has an earlier end.
   */
  recordFailure(subject: string, windowMs: number): Promise<FailureWindow>;
  /** The failures in the open window, or undefined when there are none. */
  failures(subject: string): Promise<FailureWindow | undefined>;
  /**
   * Forgets the subject's failures. Returns the cleared record (count 0, the window's end kept,
   * a new version: what copies order a late failure's copy against), or undefined when no window
   * was open.
   */
  clearFailures(subject: string): Promise<FailureWindow | undefined>;
  /** Deletes what has expired; returns how many entries went. */
  prune(): Promise<number>;
}

/**
 * Everything still in force, as the database holds it: what a copy is rebuilt from. Failures
 * include cleared records (count 0) whose window is still open.
 */
export interface AuthStateSnapshot {
  readonly revocations: readonly { kind: RevocationKind; id: string; expiresAtMs: number }[];
  readonly failures: readonly { subject: string; count: number; expiresAtMs: number; version: number }[];
}

/** The durable store, which can also list what is in force. */
export interface DurableAuthStateStore extends AuthStateStore {
  snapshot(): Promise<AuthStateSnapshot>;
}
