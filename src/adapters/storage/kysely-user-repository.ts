import { type Kysely, sql } from 'kysely';
import { errors } from '../../domain/errors.js';
import {
  type AccountChange,
  isActiveAdmin,
  type NewUser,
  type User,
  type UserWithPasswordHash,
} from '../../domain/user.js';
import type { UserQuery, UserRepository } from '../../ports/user-repository.js';
import { type Dialect, isUniqueViolation } from './database.js';
import type { DatabaseSchema } from './schema.js';

const COLUMNS = [
  'id',
  'username',
  'email',
  'role',
  'created_at',
  'updated_at',
  'disabled_at',
  'sessions_not_before',
] as const;
/** The advisory lock that serialises changes to who is an admin on PostgreSQL (any 64-bit constant). */
const PG_ADMINS_LOCK = 0x75_73_61_64_6d;

type UserRow = Omit<User, 'disabled'> & { disabled_at: string | null };

function toUser({ disabled_at, ...row }: UserRow): User {
  return { ...row, disabled: disabled_at !== null };
}

/** `%`, `_` and the escape itself taken literally in a LIKE pattern (escape character `\`). */
function likeLiteral(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** Users in SQLite or PostgreSQL through one Kysely query set. */
export class KyselyUserRepository implements UserRepository {
  constructor(
    private readonly db: Kysely<DatabaseSchema>,
    private readonly dialect: Dialect,
  ) {}

  async create(user: NewUser): Promise<User> {
    try {
      return toUser(await this.db.insertInto('users').values(user).returning(COLUMNS).executeTakeFirstOrThrow());
    } catch (error) {
      // Two registrations raced past the service's checks: say which field collided.
      if (isUniqueViolation(error)) {
        throw (await this.usernameTaken(user.username)) ? errors.usernameTaken() : errors.emailTaken();
      }
      throw error;
    }
  }

  async findByUsername(username: string): Promise<UserWithPasswordHash | undefined> {
    const row = await this.db
      .selectFrom('users')
      .select([...COLUMNS, 'password_hash'])
      // The first condition lets the unique index on lower(username) find the row.
      .where(sql<string>`lower(username)`, '=', username.toLowerCase())
      .where('username', '=', username)
      .executeTakeFirst();
    return row && { ...toUser(row), password_hash: row.password_hash };
  }

  async findById(id: number): Promise<User | undefined> {
    const row = await this.db.selectFrom('users').select(COLUMNS).where('id', '=', id).executeTakeFirst();
    return row && toUser(row);
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

  async list({ q, limit, after }: UserQuery): Promise<User[]> {
    let query = this.db.selectFrom('users').select(COLUMNS).orderBy('id');
    if (after !== undefined) query = query.where('id', '>', after);
    if (q !== undefined && q !== '') {
      const pattern = `%${likeLiteral(q.toLowerCase())}%`;
      query = query.where((eb) =>
        eb.or([
          eb(sql<string>`lower(username)`, 'like', sql<string>`${pattern} escape '\\'`),
          eb('email', 'like', sql<string>`${pattern} escape '\\'`),
        ]),
      );
    }
    if (limit !== undefined) query = query.limit(limit);
    return (await query.execute()).map(toUser);
  }

  changeAccount(id: number, change: AccountChange, at: string): Promise<User | undefined> {
    return this.db.transaction().execute(async (trx) => {
      // Two admins demoting each other at once must not both succeed. On SQLite the update below
      // takes the database's one write lock, so the count after it is exact as it is.
      if (this.dialect === 'postgres') await sql`select pg_advisory_xact_lock(${PG_ADMINS_LOCK})`.execute(trx);
      const before = await trx.selectFrom('users').select(COLUMNS).where('id', '=', id).executeTakeFirst();
      if (!before) return undefined;
      const disabledAt =
        change.disabled === undefined ? before.disabled_at : change.disabled ? (before.disabled_at ?? at) : null;
      const row = await trx
        .updateTable('users')
        .set({
          role: change.role ?? before.role,
          disabled_at: disabledAt,
          // Disabling ends the sessions open now: they do not come back with the account.
          sessions_not_before: before.disabled_at === null && disabledAt !== null ? at : before.sessions_not_before,
          updated_at: at,
        })
        .where('id', '=', id)
        .returning(COLUMNS)
        .executeTakeFirstOrThrow();
      const after = toUser(row);
      if (isActiveAdmin(toUser(before)) && !isActiveAdmin(after)) {
        const { admins } = await trx
          .selectFrom('users')
          .select((eb) => eb.fn.countAll<number | string>().as('admins'))
          .where('role', '=', 'admin')
          .where('disabled_at', 'is', null)
          .executeTakeFirstOrThrow();
        // Throwing rolls the change back.
        if (Number(admins) === 0) throw errors.lastAdmin();
      }
      return after;
    });
  }
}
