import { errors } from './errors.js';

/**
 * Users and the rules for their fields.
 *
 * Usernames are case-sensitive for login (`Alice` logs in as `Alice`), but two usernames that
 * differ only in case cannot both be registered, so nobody can pose as `admin` with `Admin`.
 * Emails are stored lower-case and are unique.
 */

export const ROLES = ['user', 'admin'] as const;
export type Role = (typeof ROLES)[number];

export const USERNAME_MIN_LENGTH = 3;
export const USERNAME_MAX_LENGTH = 32;
export const USERNAME_PATTERN = '^[A-Za-z0-9_.-]+$';
export const EMAIL_MAX_LENGTH = 254;
/** One `@`, no whitespace, a dot in the domain: what a person means by "an email address". */
export const EMAIL_PATTERN = '^[^\\s@]+@[^\\s@.]+(\\.[^\\s@.]+)+$';
/** bcrypt reads at most 72 bytes; longer passwords are refused rather than silently truncated. */
export const PASSWORD_MAX_BYTES = 72;
/** The floor of `password_min_length`: the create-user schema's minimum (spec §5.6). */
export const PASSWORD_MIN_LENGTH_FLOOR = 8;

/** A user as the service returns it: never the password hash. */
export interface User {
  readonly id: number;
  readonly username: string;
  readonly email: string;
  readonly role: Role;
  readonly created_at: string;
  readonly updated_at: string;
  /** Disabled by an administrator: no login, and its sessions and API keys stop working. */
  readonly disabled: boolean;
  /**
   * Session tokens issued (`iat`) in an earlier second are refused: disabling an account ends its
   * sessions for good, so enabling it again brings back its API keys but not its sessions.
   */
  readonly sessions_not_before: string | null;
}

/** A stored user with the hash, for the login check only. */
export interface UserWithPasswordHash extends User {
  readonly password_hash: string;
}

export interface NewUser {
  readonly username: string;
  readonly email: string;
  readonly role: Role;
  readonly password_hash: string;
  readonly created_at: string;
  readonly updated_at: string;
}

/** What an administrator may change about an account. */
export interface AccountChange {
  readonly role?: Role;
  readonly disabled?: boolean;
}

/** Whether the account counts as an administrator: an enabled admin. */
export function isActiveAdmin(user: Pick<User, 'role' | 'disabled'>): boolean {
  return user.role === 'admin' && !user.disabled;
}

export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

export function passwordBytes(password: string): number {
  return Buffer.byteLength(password, 'utf8');
}

/** Length in characters (Unicode code points), as a person counts them. */
export function passwordLength(password: string): number {
  let n = 0;
  for (const _ of password) n++;
  return n;
}

/** Throws the 400 of spec §5.6 (or the 72-byte rule) when the password breaks a length rule. */
export function assertPasswordAcceptable(password: string, minLength: number): void {
  if (passwordLength(password) < minLength) throw errors.passwordTooShort(minLength);
  if (passwordBytes(password) > PASSWORD_MAX_BYTES) throw errors.passwordTooLong(PASSWORD_MAX_BYTES);
}

/** Whether the username has the shape registration accepts. */
export function isValidUsername(username: string): boolean {
  return (
    username.length >= USERNAME_MIN_LENGTH &&
    username.length <= USERNAME_MAX_LENGTH &&
    new RegExp(USERNAME_PATTERN).test(username)
  );
}

export function isValidEmail(email: string): boolean {
  return email.length <= EMAIL_MAX_LENGTH && new RegExp(EMAIL_PATTERN).test(email);
}
