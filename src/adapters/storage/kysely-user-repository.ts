import { type Kysely, sql } from 'kysely';
import { errors } from '../../domain/errors.js';
import type { NewUser, User, UserWithPasswordHash } from '../../domain/user.js';
import type { UserRepository } from '../../ports/user-repository.js';
import { isUniqueViolation } from './database.js';
import type { DatabaseSchema } from './schema.js';

const COLUMNS = ['id', 'username', 'email', 'role', 'created_at', 'updated_at'] as const;

/** Users in SQLite or PostgreSQL through one Kysely query set. */
export class KyselyUserRepository implements UserRepository {
  constructor(private readonly db: Kysely<DatabaseSchema>) {}

  async create(user: NewUser): Promise<User> {
    try {
      return await this.db.insertInto('users').values(user).returning(COLUMNS).executeTakeFirstOrThrow();
    } catch (error) {
      // Two registrations raced past the service's checks: say which field collided.
      if (isUniqueViolation(error)) {
        throw (await this.usernameTaken(user.username)) ? errors.usernameTaken() : errors.emailTaken();
      }
      throw error;
    }
  }

  findByUsername(username: string): Promise<UserWithPasswordHash | undefined> {
    return (
      this.db
        .selectFrom('users')
        .select([...COLUMNS, 'password_hash'])
        // The first condition lets the unique index on lower(username) find the row.
        .where(sql<string>`lower(username)`, '=', username.toLowerCase())
        .where('username', '=', username)
        .executeTakeFirst()
    );
  }

  findById(id: number): Promise<User | undefined> {
    return this.db.selectFrom('users').select(COLUMNS).where('id', '=', id).executeTakeFirst();
  }

  async usernameTaken(username: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('users')
      .select('id')
      .where(sql<string>`lower(username)`, '=', username.toLowerCase())
      .executeTakeFirst();
    return row !== undefined;
  }

  async emailTaken(email: string): Promise<boolean> {
    const row = await this.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirst();
    return row !== undefined;
  }
}
