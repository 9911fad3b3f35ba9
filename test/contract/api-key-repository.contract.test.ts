import { beforeAll, describe, expect, it } from 'vitest';
import { KyselyApiKeyRepository } from '../../src/adapters/storage/kysely-api-key-repository.js';
import { KyselyUserRepository } from '../../src/adapters/storage/kysely-user-repository.js';
import type { NewApiKey } from '../../src/domain/api-key.js';
import type { ApiKeyRepository } from '../../src/ports/api-key-repository.js';
import type { UserRepository } from '../../src/ports/user-repository.js';
import { BACKENDS } from '../helpers/backends.js';
import { useOpenDatabase } from '../helpers/storage.js';

/** One contract, every storage adapter: API keys, found by hash. */
describe.each(BACKENDS)('ApiKeyRepository on $name', (backend) => {
  const { database } = useOpenDatabase(backend);
  let keys: ApiKeyRepository;
  let users: UserRepository;
  let n = 0;
  const newUser = async () => {
    n++;
    return users.create({
      username: `keyowner${n}`,
      email: `keyowner${n}@example.com`,
      role: 'user',
      password_hash: 'x',
      created_at: '2024-05-06T07:08:09Z',
      updated_at: '2024-05-06T07:08:09Z',
    });
  };
  const newKey = (userId: number, overrides: Partial<NewApiKey> = {}): NewApiKey => {
    n++;
    return {
      user_id: userId,
      name: `key ${n}`,
      prefix: `us_prefix${n}`.slice(0, 11),
      key_hash: `${n}`.padStart(64, 'a'),
      created_at: '2024-05-06T07:08:09.123456Z',
      expires_at: null,
      ...overrides,
    };
  };

  beforeAll(() => {
    if (!backend.available) return;
    keys = new KyselyApiKeyRepository(database.db);
    users = new KyselyUserRepository(database.db, database.dialect);
  });

  it.skipIf(!backend.available)('creates a key and finds it by hash, never returning the hash', async () => {
    const user = await newUser();
    const input = newKey(user.id, { expires_at: '2030-01-01T00:00:00Z' });
    const created = await keys.create(input);
    const { key_hash, ...visible } = input;
    expect(created).toEqual({ id: expect.any(Number), ...visible, last_used_at: null, revoked_at: null });
    expect(await keys.findByHash(key_hash)).toEqual(created);
    expect(await keys.findByHash('f'.repeat(64))).toBeUndefined();
  });

  it.skipIf(!backend.available)('refuses two keys with one hash', async () => {
    const user = await newUser();
    const input = newKey(user.id);
    await keys.create(input);
    await expect(keys.create({ ...input, name: 'again' })).rejects.toThrow();
  });

  it.skipIf(!backend.available)("lists a user's keys newest first, and no one else's", async () => {
    const [alice, bob] = [await newUser(), await newUser()];
    const first = await keys.create(newKey(alice.id));
    const second = await keys.create(newKey(alice.id));
    await keys.create(newKey(bob.id));
    expect((await keys.listByUser(alice.id)).map((k) => k.id)).toEqual([second.id, first.id]);
  });

  it.skipIf(!backend.available)("revokes only the owner's key, keeping the first revocation time", async () => {
    const [alice, bob] = [await newUser(), await newUser()];
    const key = await keys.create(newKey(alice.id));
    expect(await keys.revoke(bob.id, key.id, '2025-01-01T00:00:00Z')).toBeUndefined();
    expect((await keys.findByHash(`${n}`.padStart(64, 'a')))?.revoked_at ?? null).toBeNull();
    expect(await keys.revoke(alice.id, key.id, '2025-01-01T00:00:00Z')).toMatchObject({
      revoked_at: '2025-01-01T00:00:00Z',
    });
    expect(await keys.revoke(alice.id, key.id, '2025-02-01T00:00:00Z')).toMatchObject({
      revoked_at: '2025-01-01T00:00:00Z',
    });
    expect(await keys.revoke(alice.id, 987_654_321, '2025-01-01T00:00:00Z')).toBeUndefined();
  });

  it.skipIf(!backend.available)('records the last use', async () => {
    const user = await newUser();
    const input = newKey(user.id);
    const key = await keys.create(input);
    await keys.touch(key.id, '2025-03-04T05:06:07.5Z');
    expect((await keys.findByHash(input.key_hash))?.last_used_at).toBe('2025-03-04T05:06:07.5Z');
  });
});
