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
    users = new KyselyUserRepository(database.db, database.dialect);
    settings = new KyselySettingsRepository(database.db);
  });

  it.skipIf(!backend.available)(
    'creates a user and reads it back by username and id, hash only by username',
    async () => {
      const input = newUser({ role: 'admin' });
      const created = await users.create(input);
      const { password_hash, ...visible } = input;
      expect(created).toEqual({ id: expect.any(Number), ...visible, disabled: false, sessions_not_before: null });
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

  it.skipIf(!backend.available)('raises the settings version with every save that changes something', async () => {
    const before = await settings.version();
    expect(await settings.save({ max_login_attempts: 4 }, '2024-02-01T00:00:00Z')).toBe(before + 1);
    expect(await settings.version()).toBe(before + 1);
    expect(await settings.save({}, '2024-02-02T00:00:00Z')).toBe(before + 1);
    // Concurrent saves each get a version of their own.
    const saved = await Promise.all(
      [3, 5, 6].map((n) => settings.save({ max_login_attempts: n }, '2024-02-03T00:00:00Z')),
    );
    expect(saved.toSorted((x, y) => x - y)).toEqual([before + 2, before + 3, before + 4]);
    expect(await settings.version()).toBe(before + 4);
  });

  it.skipIf(!backend.available)(
    'saves made at once, naming the settings in either order, all go through, each whole',
    async () => {
      // Over connections of their own on PostgreSQL (a pool of several), as instances would be.
      const pairs = Array.from({ length: 16 }, (_, i) => ({
        max_login_attempts: 20 + i,
        lockout_duration_minutes: 200 + i,
      }));
      const saved = await Promise.all(
        pairs.map((pair, i) =>
          settings.save(
            i % 2 === 0
              ? pair
              : {
                  lockout_duration_minutes: pair.lockout_duration_minutes,
                  max_login_attempts: pair.max_login_attempts,
                },
            '2024-03-01T00:00:00Z',
          ),
        ),
      );
      expect(new Set(saved).size).toBe(pairs.length);
      const { max_login_attempts, lockout_duration_minutes } = await settings.load();
      // The last save is in force whole: its pair, not one setting of one save and one of another.
      const last = saved.indexOf(Math.max(...saved));
      expect({ max_login_attempts, lockout_duration_minutes }).toEqual(pairs[last]);
    },
  );

  it.skipIf(!backend.available)('lists users by id, pages with limit/after, searches username and email', async () => {
    const tag = `srch${n}`;
    const a = await users.create(newUser({ username: `${tag}_Anna` }));
    const b = await users.create(newUser({ email: `${tag}.bert@example.com` }));
    const c = await users.create(newUser({ username: `${tag}_Cleo` }));
    await users.create(newUser({ username: 'percent%user' }));
    expect((await users.list({ q: tag.toUpperCase() })).map((u) => u.id)).toEqual([a.id, b.id, c.id]);
    expect((await users.list({ q: tag, limit: 2 })).map((u) => u.id)).toEqual([a.id, b.id]);
    expect((await users.list({ q: tag, after: b.id })).map((u) => u.id)).toEqual([c.id]);
    // LIKE wildcards are taken literally.
    expect((await users.list({ q: `${tag}%` })).map((u) => u.id)).toEqual([]);
    expect((await users.list({ q: 'percent%' })).map((u) => u.username)).toEqual(['percent%user']);
    expect((await users.list({ q: 't%u' })).map((u) => u.username)).toEqual(['percent%user']);
    const all = await users.list({});
    expect(all.map((u) => u.id)).toEqual([...all.map((u) => u.id)].sort((x, y) => x - y));
    expect(all[0]).not.toHaveProperty('password_hash');
  });

  it.skipIf(!backend.available)(
    'changes roles and the disabled state, and never removes the last enabled admin',
    async () => {
      const at = '2025-01-02T03:04:05Z';
      // Whatever admins earlier tests made are demoted first, so that this one is alone.
      for (const u of await users.list({})) {
        if (u.role === 'admin' && !u.disabled)
          await users.changeAccount(u.id, { role: 'user' }, at).catch(() => undefined);
      }
      const admin = await users.create(newUser({ role: 'admin' }));
      const other = await users.create(newUser());
      for (const u of await users.list({})) {
        if (u.id !== admin.id && u.role === 'admin') await users.changeAccount(u.id, { disabled: true }, at);
      }
      await expect(users.changeAccount(admin.id, { role: 'user' }, at)).rejects.toMatchObject({ statusCode: 409 });
      await expect(users.changeAccount(admin.id, { disabled: true }, at)).rejects.toMatchObject({
        statusCode: 409,
        detail: 'Cannot remove the last administrator',
      });
      expect(await users.findById(admin.id)).toMatchObject({ role: 'admin', disabled: false });

      const promoted = await users.changeAccount(other.id, { role: 'admin' }, at);
      expect(promoted).toMatchObject({ role: 'admin', disabled: false, updated_at: '2025-01-02T03:04:05Z' });
      expect(await users.changeAccount(admin.id, { disabled: true }, at)).toMatchObject({
        disabled: true,
        sessions_not_before: '2025-01-02T03:04:05Z',
      });
      // Disabling again keeps the first instant.
      expect(await users.changeAccount(admin.id, { disabled: true }, '2025-02-01T00:00:00Z')).toMatchObject({
        sessions_not_before: '2025-01-02T03:04:05Z',
      });
      expect((await users.findByUsername(admin.username))?.disabled).toBe(true);
      // Now `other` is the last one.
      await expect(users.changeAccount(other.id, { role: 'user' }, at)).rejects.toMatchObject({ statusCode: 409 });
      // Enabling keeps it: the sessions the disabling ended stay ended.
      expect(await users.changeAccount(admin.id, { disabled: false }, at)).toMatchObject({
        disabled: false,
        sessions_not_before: '2025-01-02T03:04:05Z',
      });
      expect(await users.changeAccount(other.id, { role: 'user' }, at)).toMatchObject({ role: 'user' });
      expect(await users.changeAccount(987_654_321, { role: 'user' }, at)).toBeUndefined();
    },
  );

  it.skipIf(!backend.available)('two admins demoting each other at once: one of them stays admin', async () => {
    const at = '2025-01-02T03:04:05Z';
    const x = await users.create(newUser({ role: 'admin' }));
    const y = await users.create(newUser({ role: 'admin' }));
    for (const u of await users.list({})) {
      if (u.id !== x.id && u.id !== y.id && u.role === 'admin' && !u.disabled) {
        await users.changeAccount(u.id, { disabled: true }, at);
      }
    }
    const results = await Promise.allSettled([
      users.changeAccount(x.id, { role: 'user' }, at),
      users.changeAccount(y.id, { disabled: true }, at),
    ]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const admins = (await users.list({})).filter((u) => u.role === 'admin' && !u.disabled);
    expect(admins).toHaveLength(1);
  });

  it.skipIf(!backend.available)('migrations are idempotent', async () => {
    expect((await migrateToLatest(database.db, database.dialect)).applied).toEqual([]);
  });
});
