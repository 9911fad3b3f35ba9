import type { AccountChange, NewUser, User, UserWithPasswordHash } from '../domain/user.js';

/** A page of users for the administrators' list. */
export interface UserQuery {
  /** Substring of the username or email, in any letter case. */
  readonly q?: string;
  /** At most this many, by id. */
  readonly limit?: number;
  /** Only ids above this one. */
  readonly after?: number;
}

/**
 * Where users live. Every adapter passes `test/contract/user-repository.contract.test.ts`.
 *
 * @example
 *   const user = await users.create({ username: 'alice', email: 'alice@example.com', role: 'user', password_hash, created_at, updated_at });
 *   await users.findByUsername('alice'); // with the hash, for the login check
 *   await users.changeAccount(user.id, { disabled: true }, now); // errors.lastAdmin() if she was the last admin
 */
export interface UserRepository {
  /**
   * Inserts a user. Throws `errors.usernameTaken()` when the username is used (in any letter case),
   * else `errors.emailTaken()` when the email is.
   */
  create(user: NewUser): Promise<User>;
  /** The user with exactly this username (case-sensitive), hash included. */
  findByUsername(username: string): Promise<UserWithPasswordHash | undefined>;
  findById(id: number): Promise<User | undefined>;
  /** Whether a user has this username in any letter case. */
  usernameTaken(username: string): Promise<boolean>;
  /** Whether a user has this (lower-case) email. */
  emailTaken(email: string): Promise<boolean>;
  /** Users in id order, optionally filtered by `q`. */
  list(query: UserQuery): Promise<User[]>;
  /**
   * Changes the role and/or the disabled state at `at`, atomically against concurrent changes on
   * any instance: throws `errors.lastAdmin()` (and changes nothing) when no enabled admin would be
   * left. Undefined when there is no such user.
   */
  changeAccount(id: number, change: AccountChange, at: string): Promise<User | undefined>;
}
