import { errors } from '../domain/errors.js';
import { canonicalTimestamp } from '../domain/timestamp.js';
import type { AccountChange, User } from '../domain/user.js';
import type { AuthStateStore } from '../ports/auth-state-store.js';
import type { Clock } from '../ports/clock.js';
import type { UserQuery, UserRepository } from '../ports/user-repository.js';
import { fetchPage } from '../support/paging.js';

export interface UserAdminServiceOptions {
  readonly users: UserRepository;
  /** Where lockouts are counted (the same store the login reads). */
  readonly state: AuthStateStore;
  readonly clock: Clock;
}

/**
 * What administrators do to accounts: list and search them, change a role, disable and enable,
 * lift a lockout. The last enabled administrator can be neither demoted nor disabled (409).
 * A disabled user's sessions and API keys stop at once everywhere: every authenticated request
 * re-reads its user from the database.
 */
export class UserAdminService {
  constructor(private readonly options: UserAdminServiceOptions) {}

  async list(query: UserQuery & { limit: number }): Promise<{ items: User[]; nextAfter?: number }> {
    const page = await fetchPage(query.limit, (limit) => this.options.users.list({ ...query, limit }));
    const last = page.items.at(-1);
    return page.more && last ? { items: page.items, nextAfter: last.id } : { items: page.items };
  }

  async get(id: number): Promise<User> {
    const user = await this.options.users.findById(id);
    if (!user) throw errors.userNotFound();
    return user;
  }

  async change(id: number, change: AccountChange): Promise<User> {
    const at = canonicalTimestamp(new Date(this.options.clock.now()).toISOString())!;
    const user = await this.options.users.changeAccount(id, change, at);
    if (!user) throw errors.userNotFound();
    return user;
  }

  /** Forgets the user's failed logins: a locked account can log in again at once. */
  async unlock(id: number): Promise<User> {
    const user = await this.get(id);
    await this.options.state.clearFailures(user.username);
    return user;
  }

  /** Whether the user is locked out now (failures at or above `maxAttempts`). */
  async locked(user: User, maxAttempts: number): Promise<boolean> {
    const failures = await this.options.state.failures(user.username);
    return failures !== undefined && failures.count >= maxAttempts;
  }
}
