import { beforeAll, describe, expect, it } from 'vitest';
import { KyselySettingsRepository } from '../../src/adapters/storage/kysely-settings-repository.js';
import { KyselyUserRepository } from '../../src/adapters/storage/kysely-user-repository.js';
import { migrateToLatest } from '../../src/adapters/storage/migrations.js';
import type { NewUser } from '../../src/domain/user.js';
import type { SettingsRepository } from '../../src/ports/settings-repository.js';
import type { UserRepository } from '../../src/ports/user-repository.js';
import { BACKENDS } from '../helpers/backends.js';
import { useOpenDatabase } from '../helpers/storage.js';

/** One contract, every storage adapter: users and runtime settings. */
describe.each(BACKENDS)('UserRepository and SettingsRepository on $name', (backend) => {
  const { database } = useOpenDatabase(backend);
  let users: UserRepository;
  let settings: SettingsRepository;
  let n = 0;
  const newUser = (overrides: Partial<NewUser> = {}): NewUser => {
    n++;
    return {
      username: `user${n}`,
      email: `user${n}@example.com`,
      role: 'user',
      password_hash: `$2b$04$hash${n}`,
      created_at: '2024-05-06T07:08:09.123456Z',
      updated_at: '2024-05-06T07:08:09.123456Z',
      ...overrides,
    };
  };

  beforeAll(() => {
    if (!backend.available) return;
    users = new KyselyUserRepository(database.db);
    settings = new KyselySettingsRepository(database.db);
  });

  it.skipIf(!backend.available)(
    'creates a user and reads it back by username and id, hash only by username',
    async () => {
      const input = newUser({ role: 'admin' });
      const created = await users.create(input);
      const { password_hash, ...visible } = input;
      expect(created).toEqual({ id: expect.any(Number), ...visible });
      expect(await users.findByUsername(input.username)).toEqual({ ...created, password_hash });
      expect(await users.findById(created.id)).toEqual(created);
    },
  );

  it.skipIf(!backend.available)('matches usernames exactly at lookup, but counts them taken in any case', async () => {
    const created = await users.create(newUser({ username: 'MixedCase' }));
    expect(await users.findByUsername('mixedcase')).toBeUndefined();
    expect((await users.findByUsername('MixedCase'))?.id).toBe(created.id);
    expect(await users.usernameTaken('MIXEDCASE')).toBe(true);
    expect(await users.usernameTaken('nobody-here')).toBe(false);
  });

  it.skipIf(!backend.available)('refuses a username taken in another case with usernameTaken', async () => {
    await users.create(newUser({ username: 'Taken.Name' }));
    await expect(users.create(newUser({ username: 'taken.name' }))).rejects.toMatchObject({
      statusCode: 409,
      detail: 'Username already registered',
    });
  });

  it.skipIf(!backend.available)('refuses a taken email with emailTaken', async () => {
    await users.create(newUser({ email: 'same@example.com' }));
    expect(await users.emailTaken('same@example.com')).toBe(true);
    expect(await users.emailTaken('other@example.com')).toBe(false);
    await expect(users.create(newUser({ email: 'same@example.com' }))).rejects.toMatchObject({
      statusCode: 409,
      detail: 'User already exists',
    });
  });

  it.skipIf(!backend.available)('finds nothing for unknown users', async () => {
    expect(await users.findByUsername('ghost')).toBeUndefined();
    expect(await users.findById(987_654_321)).toBeUndefined();
  });

  it.skipIf(!backend.available)('stores only lower-case emails and known roles', async () => {
    await expect(users.create(newUser({ email: 'Upper@Example.com' }))).rejects.toThrow();
    await expect(users.create(newUser({ role: 'root' as never }))).rejects.toThrow();
  });

  it.skipIf(!backend.available)('saves settings, upserting, and loads them back', async () => {
    expect(await settings.load()).toEqual({});
    await settings.save({ max_login_attempts: 3, password_min_length: 10 }, '2024-01-01T00:00:00Z');
    await settings.save({ max_login_attempts: 7 }, '2024-01-02T00:00:00Z');
    expect(await settings.load()).toEqual({ max_login_attempts: 7, password_min_length: 10 });
    await settings.save({}, '2024-01-03T00:00:00Z');
    expect(await settings.load()).toEqual({ max_login_attempts: 7, password_min_length: 10 });
  });

  it.skipIf(!backend.available)('migrations are idempotent', async () => {
    expect((await migrateToLatest(database.db, database.dialect)).applied).toEqual([]);
  });
});
