import bcrypt from 'bcrypt';
import type { PasswordHasher } from '../../ports/password-hasher.js';

const DUMMY_SALT_AND_HASH = 'WuknzmUaK3325uEOPYdb7.uEeIKWirBJX3rzANcuRf.zz.wbiaCY6';

/**
 * bcrypt at a fixed cost. The hashing runs on libuv's thread pool, not the event loop.
 * Callers refuse passwords over 72 bytes before they get here: bcrypt would silently ignore the rest.
 */
export class BcryptPasswordHasher implements PasswordHasher {
  readonly dummyHash: string;

  constructor(private readonly rounds: number) {
    // A well-formed hash at this cost whose password nobody knows; made without spending the cost.
    this.dummyHash = `$2b$${String(rounds).padStart(2, '0')}$${DUMMY_SALT_AND_HASH}`;
  }

  hash(password: string): Promise<string> {
    return bcrypt.hash(password, this.rounds);
  }

  verify(password: string, hash: string): Promise<boolean> {
    return bcrypt.compare(password, hash);
  }
}
