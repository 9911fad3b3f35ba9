/**
 * One-way password hashing.
 *
 * @example
 *   const hash = await hasher.hash('correct horse');
 *   await hasher.verify('correct horse', hash); // true
 */
export interface PasswordHasher {
  hash(password: string): Promise<string>;
  /** Whether `password` matches `hash`; takes the same time whatever the answer. */
  verify(password: string, hash: string): Promise<boolean>;
  /**
   * A hash that no password matches, at the same cost as `hash` makes: verifying against it takes
   * as long as a real check, so an unknown username cannot be told from a wrong password by time.
   */
  readonly dummyHash: string;
}
