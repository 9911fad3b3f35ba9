import type { NewUser, User, UserWithPasswordHash } from '../domain/user.js';

/**
 * Where users live. Every adapter passes `test/contract/user-repository.contract.test.ts`.
 *
 * @example
 *   const user = await users.create({ username: 'alice', email: 'alice@example.com', role: 'user', password_hash, created_at, updated_at });
 *   await users.findByUsername('alice'); // with the hash, for the login check
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
}
