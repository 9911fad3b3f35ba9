import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryCounters } from '../../src/adapters/counters/memory-counters.js';
import { type Database, openDatabase } from '../../src/adapters/storage/database.js';
import { KyselySettingsRepository } from '../../src/adapters/storage/kysely-settings-repository.js';
import { migrateToLatest } from '../../src/adapters/storage/migrations.js';
import { BackendUnavailableError } from '../../src/domain/errors.js';
import { AUTH_SETTINGS } from '../../src/domain/settings.js';
import type { Counters } from '../../src/ports/counters.js';
import { RuntimeSettings, type RuntimeSettingsOptions } from '../../src/services/runtime-settings.js';
import { eventually } from '../helpers/eventually.js';
import { ManualClock } from '../helpers/auth.js';

const DEFAULTS = { password_min_length: 8, max_login_attempts: 5, lockout_duration_minutes: 15 };

describe('RuntimeSettings', () => {
  let dir: string;
  let database: Database;
  let counters: MemoryCounters;
  const warnings: unknown[] = [];
  const running: RuntimeSettings[] = [];

  const make = (overrides: Partial<RuntimeSettingsOptions> = {}) => {
    const settings = new RuntimeSettings({
      definitions: Object.values(AUTH_SETTINGS),
      defaults: DEFAULTS,
      repository: new KyselySettingsRepository(database.db),
      counters,
      clock: new ManualClock(),
      pollIntervalMs: 20,
      logger: { warn: (object) => warnings.push(object), error: (object) => warnings.push(object) },
      ...overrides,
    });
    running.push(settings);
    return settings;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'urlshortener-settings-'));
    database = openDatabase({ kind: 'sqlite', url: join(dir, 's.db'), poolMax: 1 });
    await migrateToLatest(database.db, database.dialect);
    counters = new MemoryCounters();
  });
  afterAll(async () => {
    await Promise.all(running.map((s) => s.stop()));
    await database?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts from the defaults and refuses defaults out of range', async () => {
    const settings = make();
    await settings.start();
    expect(settings.current()).toEqual(DEFAULTS);
    expect(Object.isFrozen(settings.current())).toBe(true);
    expect(() => make({ defaults: { ...DEFAULTS, max_login_attempts: 0 } })).toThrow(/max_login_attempts/);
  });

  it('applies an update here at once and on another instance at its next poll', async () => {
    const here = make();
    const there = make();
    await here.start();
    await there.start();
    const seen: unknown[] = [];
    there.onChange((values) => seen.push(values));
    expect(await here.update({ max_login_attempts: 9 })).toEqual({ ...DEFAULTS, max_login_attempts: 9 });
    expect(here.current().max_login_attempts).toBe(9);
    await eventually(() => expect(there.current().max_login_attempts).toBe(9), { timeoutMs: 1000 });
    expect(seen).toEqual([{ ...DEFAULTS, max_login_attempts: 9 }]);
    await here.update(DEFAULTS);
  });

  it('without shared counters, follows the version stored with the settings (a change by another process)', async () => {
    const here = make({ counters: undefined });
    const there = make({ counters: undefined });
    await here.start();
    await there.start();
    await here.update({ max_login_attempts: 4 });
    await eventually(() => expect(there.current().max_login_attempts).toBe(4), { timeoutMs: 1000 });
    // Written by a process of its own, which announced it nowhere but in the database.
    await new KyselySettingsRepository(database.db).save({ password_min_length: 20 }, '2024-01-01T00:00:00Z');
    for (const settings of [here, there]) {
      await eventually(() => expect(settings.current().password_min_length).toBe(20), { timeoutMs: 1000 });
    }
    await here.update(DEFAULTS);
    await eventually(() => expect(there.current()).toEqual(DEFAULTS), { timeoutMs: 1000 });
  });

  it('without shared counters and the database away: keeps the values in force, says so once, catches up when it is back', async () => {
    let down = false;
    const real = new KyselySettingsRepository(database.db);
    const away = () => Promise.reject(new BackendUnavailableError('database'));
    const failing = {
      load: () => (down ? away() : real.load()),
      save: (values: Parameters<typeof real.save>[0], at: string) => (down ? away() : real.save(values, at)),
      version: () => (down ? away() : real.version()),
    };
    const lines: string[] = [];
    const logger = {
      warn: (_: unknown, line: string) => lines.push(line),
      error: (_: unknown, line: string) => lines.push(line),
    };
    const there = make({ counters: undefined, repository: failing, logger });
    await there.start();
    down = true;
    await new Promise((resolve) => setTimeout(resolve, 200)); // ten polls, each failing
    expect(there.current()).toEqual(DEFAULTS);
    expect(lines).toEqual(['runtime settings refresh failed; keeping the values in force']);
    // Changed by another process while this one could not read the database.
    await real.save({ max_login_attempts: 3 }, '2024-01-01T00:00:00Z');
    down = false;
    await eventually(() => expect(there.current().max_login_attempts).toBe(3), { timeoutMs: 1000 });
    await real.save(DEFAULTS, '2024-01-01T00:00:01Z');
    await eventually(() => expect(there.current()).toEqual(DEFAULTS), { timeoutMs: 1000 });
  });

  it('validates updates: unknown names and values out of range are 422s and change nothing', async () => {
    const settings = make();
    await settings.start();
    await expect(settings.update({ nope: 1 })).rejects.toMatchObject({
      statusCode: 422,
      detail: "body: unknown field 'nope'",
    });
    await expect(settings.update({ password_min_length: 7 })).rejects.toMatchObject({
      statusCode: 422,
      detail: "body: 'password_min_length' must be an integer from 8 to 72",
    });
    expect(settings.current()).toEqual(DEFAULTS);
  });

  it('keeps working while the change signal is away: starts, saves, reloads from the database, says so once', async () => {
    let signal = false;
    const away = () => Promise.reject(new BackendUnavailableError('redis'));
    // Only what RuntimeSettings uses of its counters: the change signal.
    const flaky = {
      version: (key: string) => (signal ? counters.version(key) : away()),
      bump: (key: string) => (signal ? counters.bump(key) : away()),
    } as unknown as Counters;
    const lines: string[] = [];
    const logger = {
      warn: (_: unknown, line: string) => lines.push(line),
      error: (_: unknown, line: string) => lines.push(line),
    };
    const here = make({ counters: flaky, logger });
    const there = make({ counters: flaky, logger });
    await here.start();
    await there.start();
    expect(await here.update({ max_login_attempts: 7 })).toEqual({ ...DEFAULTS, max_login_attempts: 7 });
    await eventually(() => expect(there.current().max_login_attempts).toBe(7), { timeoutMs: 3000 });
    await new Promise((resolve) => setTimeout(resolve, 200)); // ten more polls
    expect(lines).toEqual(
      Array(2).fill('runtime settings change signal unavailable; reloading from the database every second'),
    );
    signal = true;
    await here.update({ max_login_attempts: 6 });
    await eventually(() => expect(there.current().max_login_attempts).toBe(6), { timeoutMs: 1000 });
    await here.update(DEFAULTS);
  });

  it('ignores a stored value that breaks its rule, with a warning', async () => {
    await new KyselySettingsRepository(database.db).save(
      { lockout_duration_minutes: 0, unknown_setting: 3 },
      '2024-01-01T00:00:00Z',
    );
    const settings = make();
    await settings.start();
    expect(settings.current()).toEqual(DEFAULTS);
    expect(warnings).toContainEqual({ setting: 'lockout_duration_minutes', value: 0 });
  });
});
