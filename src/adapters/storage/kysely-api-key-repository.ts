import type { Kysely } from 'kysely';
import type { ApiKey, NewApiKey } from '../../domain/api-key.js';
import type { ApiKeyRepository } from '../../ports/api-key-repository.js';
import type { DatabaseSchema } from './schema.js';

const COLUMNS = ['id', 'user_id', 'name', 'prefix', 'created_at', 'last_used_at', 'expires_at', 'revoked_at'] as const;

/** API keys in SQLite or PostgreSQL, found by the hash of the key (a unique index). */
export class KyselyApiKeyRepository implements ApiKeyRepository {
  constructor(private readonly db: Kysely<DatabaseSchema>) {}

  create(key: NewApiKey): Promise<ApiKey> {
    return this.db.insertInto('api_keys').values(key).returning(COLUMNS).executeTakeFirstOrThrow();
  }

  findByHash(keyHash: string): Promise<ApiKey | undefined> {
    return this.db.selectFrom('api_keys').select(COLUMNS).where('key_hash', '=', keyHash).executeTakeFirst();
  }

  listByUser(userId: number): Promise<ApiKey[]> {
    return this.db.selectFrom('api_keys').select(COLUMNS).where('user_id', '=', userId).orderBy('id', 'desc').execute();
  }

  async revoke(userId: number, id: number, at: string): Promise<ApiKey | undefined> {
    await this.db
      .updateTable('api_keys')
      .set({ revoked_at: at })
      .where('id', '=', id)
      .where('user_id', '=', userId)
      .where('revoked_at', 'is', null)
      .execute();
    return this.db
      .selectFrom('api_keys')
      .select(COLUMNS)
      .where('id', '=', id)
      .where('user_id', '=', userId)
      .executeTakeFirst();
  }

  async touch(id: number, at: string): Promise<void> {
    await this.db.updateTable('api_keys').set({ last_used_at: at }).where('id', '=', id).execute();
  }
}
