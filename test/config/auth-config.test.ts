import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveSecretKey } from '../../src/adapters/auth/secret-key.js';
import { compose } from '../../src/composition/compose.js';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { AUTH_TEST_ENV, login, me, newUser, registerUser } from '../helpers/auth.js';
import { testConfig } from '../helpers/backends.js';

const ROOT = join(import.meta.dirname, '..', '..');
/** 32 characters that look random (production refuses low-entropy keys). */
const KEY_32 = 'q7Zt2mXc9LpV4nRb8sKd1fGh6jWy3aEu';

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return [...(error as ConfigError).problems];
  }
  return [];
}

describe('account settings', () => {
  it('have working defaults', () => {
    const config = loadConfig({});
    expect(config.auth).toEqual({
      secretKey: undefined,
      secretKeyFile: join('data', 'secret_key'),
      accessTokenMinutes: 1440,
      bcryptRounds: 12,
      admin: { username: undefined, email: undefined, password: undefined },
      defaults: { password_min_length: 8, max_login_attempts: 5, lockout_duration_minutes: 15 },
    });
    expect(config.redisUrl).toBeUndefined();
    expect(config.redisKeyPrefix).toBe('urlshortener:');
  });

  it('keep the generated key beside the SQLite file, or under ./data with PostgreSQL, unless told', () => {
    expect(loadConfig({ DATABASE_URL: 'sqlite:/var/lib/us/db.sqlite' }).auth.secretKeyFile).toBe(
      '/var/lib/us/secret_key',
    );
    expect(loadConfig({ DATABASE_URL: 'sqlite::memory:' }).auth.secretKeyFile).toBeUndefined();
    expect(loadConfig({ DATABASE_URL: 'postgres://u@h:5432/d' }).auth.secretKeyFile).toBe(join('data', 'secret_key'));
    expect(loadConfig({ SECRET_KEY_FILE: '/run/secrets/key' }).auth.secretKeyFile).toBe('/run/secrets/key');
  });

  it('refuse to start in production without a SECRET_KEY of at least 32 bytes', () => {
    expect(problemsOf({ NODE_ENV: 'production' }).join('\n')).toMatch(/SECRET_KEY: required when NODE_ENV=production/);
    const short = problemsOf({ NODE_ENV: 'production', SECRET_KEY: 'k'.repeat(31) });
    expect(short).toHaveLength(1);
    expect(short[0]).toMatch(/SECRET_KEY=\(value hidden\): must be at least 32 bytes/);
    expect(short[0]).not.toContain('k'.repeat(31));
    expect(loadConfig({ NODE_ENV: 'production', SECRET_KEY: KEY_32 }).auth.secretKey).toBe(KEY_32);
    // 32 bytes, fewer characters (outside production: there, so few different ones are refused).
    expect(loadConfig({ SECRET_KEY: 'é'.repeat(16) }).auth.secretKey).toBe('é'.repeat(16));
  });

  it.each([
    ['k'.repeat(32), /only 1 different characters/],
    ['a'.repeat(64), /only 1 different characters/],
    ['abcd'.repeat(8), /only 4 different characters/],
    ['password1'.repeat(4), /repeats a piece of 9 characters/],
    ['0123456789abcdef'.repeat(2), /repeats a piece of 16 characters/],
    ['abcdefghijklmnopqrstuvwxyz012345', /runs up or down the alphabet/],
    ['aaaaaaaaaaaaaaaaaaaaaaaabcdefgh1', /carries about \d+ bits/],
  ])('refuse a low-entropy SECRET_KEY in production (%s), without showing it', (key, reason) => {
    const problems = problemsOf({ NODE_ENV: 'production', SECRET_KEY: key });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^SECRET_KEY=\(value hidden\): too weak for NODE_ENV=production: it /);
    expect(problems[0]).toMatch(reason);
    expect(problems[0]).toContain('openssl rand -base64 48');
    expect(problems[0]).not.toContain(key);
    // Development and tests take it: the rule guards production.
    expect(loadConfig({ SECRET_KEY: key }).auth.secretKey).toBe(key);
  });

  it('accept random keys in production: hex, base64, a UUID, a long passphrase', () => {
    for (const key of [
      randomBytes(16).toString('hex'),
      randomBytes(48).toString('base64'),
      randomUUID(),
      'correct horse battery staple, and then some',
    ]) {
      expect(loadConfig({ NODE_ENV: 'production', SECRET_KEY: key }).auth.secretKey).toBe(key);
    }
  });

  it('refuse an unknown NODE_ENV (a typo would drop the production safeguards)', () => {
    for (const value of ['prod', 'Production', 'staging', 'dev']) {
      expect(problemsOf({ NODE_ENV: value })).toEqual([
        `NODE_ENV=${JSON.stringify(value)}: must be one of development, production, test`,
      ]);
    }
    for (const value of ['development', 'production', 'test']) {
      expect(loadConfig({ NODE_ENV: value, SECRET_KEY: KEY_32 }).nodeEnv).toBe(value);
    }
  });

  it('refuse a short SECRET_KEY outside production too', () => {
    expect(problemsOf({ SECRET_KEY: 'short' }).join('\n')).toMatch(/SECRET_KEY=\(value hidden\)/);
  });

  it('keep BCRYPT_ROUNDS at 10 or more, down to 4 only with NODE_ENV=test', () => {
    expect(problemsOf({ BCRYPT_ROUNDS: '9' }).join('\n')).toMatch(
      /BCRYPT_ROUNDS=9: must be at least 10 .*NODE_ENV=test/,
    );
    expect(problemsOf({ BCRYPT_ROUNDS: '4', NODE_ENV: 'production', SECRET_KEY: KEY_32 })).toHaveLength(1);
    expect(loadConfig({ BCRYPT_ROUNDS: '10' }).auth.bcryptRounds).toBe(10);
    expect(loadConfig({ BCRYPT_ROUNDS: '4', NODE_ENV: 'test' }).auth.bcryptRounds).toBe(4);
    expect(problemsOf({ BCRYPT_ROUNDS: '3', NODE_ENV: 'test' })).toHaveLength(1);
    expect(problemsOf({ BCRYPT_ROUNDS: '32' })).toHaveLength(1);
  });

  it('check ACCESS_TOKEN_EXPIRE_MINUTES and the runtime-setting defaults against their bounds', () => {
    expect(loadConfig({ ACCESS_TOKEN_EXPIRE_MINUTES: '30' }).auth.accessTokenMinutes).toBe(30);
    for (const [name, value] of [
      ['ACCESS_TOKEN_EXPIRE_MINUTES', '0'],
      ['PASSWORD_MIN_LENGTH', '7'],
      ['PASSWORD_MIN_LENGTH', '73'],
      ['MAX_LOGIN_ATTEMPTS', '0'],
      ['LOCKOUT_DURATION_MINUTES', '0'],
      ['REDIS_KEY_PREFIX', ' '],
    ] as const) {
      expect(problemsOf({ [name]: value }).join('\n'), `${name}=${value}`).toMatch(new RegExp(name));
    }
  });

  it('need ADMIN_EMAIL and ADMIN_PASSWORD with ADMIN_USERNAME, and never echo the password', () => {
    const missing = problemsOf({ ADMIN_USERNAME: 'boss' }).join('\n');
    expect(missing).toMatch(/ADMIN_EMAIL/);
    expect(missing).toMatch(/ADMIN_PASSWORD: required/);
    expect(
      problemsOf({ ADMIN_USERNAME: 'no spaces allowed', ADMIN_EMAIL: 'a@b.co', ADMIN_PASSWORD: 'x'.repeat(10) }).join(
        '\n',
      ),
    ).toMatch(/ADMIN_USERNAME/);
    const long = problemsOf({ ADMIN_USERNAME: 'boss', ADMIN_EMAIL: 'a@b.co', ADMIN_PASSWORD: 'p'.repeat(73) }).join(
      '\n',
    );
    expect(long).toMatch(/ADMIN_PASSWORD: must be at most 72 bytes/);
    expect(long).not.toContain('p'.repeat(73));
    const short = problemsOf({ ADMIN_USERNAME: 'boss', ADMIN_EMAIL: 'a@b.co', ADMIN_PASSWORD: 'seven77' }).join('\n');
    expect(short).toMatch(/ADMIN_PASSWORD: must be at least 8 characters/);
    expect(short).not.toContain('seven77');
    // The password alone is fine: `create-admin` reads it.
    expect(loadConfig({ ADMIN_PASSWORD: 'secret password' }).auth.admin.password).toBe('secret password');
  });
});

describe('the secret key', () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'urlshortener-key-'));
    dirs.push(dir);
    return dir;
  };
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('is SECRET_KEY when set, and then no file is written', () => {
    const file = join(tempDir(), 'secret_key');
    expect(resolveSecretKey({ secretKey: KEY_32, secretKeyFile: file })).toBe(KEY_32);
    expect(() => statSync(file)).toThrow();
  });

  it('is generated once and kept, readable by the owner only (0600)', () => {
    const file = join(tempDir(), 'nested', 'secret_key');
    const first = resolveSecretKey({ secretKey: undefined, secretKeyFile: file });
    expect(Buffer.byteLength(first)).toBeGreaterThanOrEqual(32);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, 'utf8').trim()).toBe(first);
    expect(resolveSecretKey({ secretKey: undefined, secretKeyFile: file })).toBe(first);
  });

  it('lives only in memory without a file (in-memory database)', () => {
    const a = resolveSecretKey({ secretKey: undefined, secretKeyFile: undefined });
    const b = resolveSecretKey({ secretKey: undefined, secretKeyFile: undefined });
    expect(a).not.toBe(b);
  });

  it('survives a restart of the embedded default: sessions stay valid', async () => {
    const databaseUrl = `sqlite:${join(tempDir(), 'app.db')}`;
    const first = await compose(testConfig(databaseUrl, AUTH_TEST_ENV), { logger: false });
    const body = newUser('key');
    let cookie: string;
    try {
      await registerUser(first.app, body);
      cookie = (await login(first.app, body.username, body.password)).cookie;
    } finally {
      await first.close();
    }
    const second = await compose(testConfig(databaseUrl, AUTH_TEST_ENV), { logger: false });
    try {
      expect((await me(second.app, cookie)).statusCode).toBe(200);
    } finally {
      await second.close();
    }
  });
});

/** `urlshortener create-admin`, run from the sources. */
describe('create-admin', () => {
  const dir = mkdtempSync(join(tmpdir(), 'urlshortener-admin-'));
  const databaseUrl = `sqlite:${join(dir, 'app.db')}`;
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function cli(args: string[], env: Record<string, string>, stdin?: string) {
    return new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli.ts'), ...args], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent', ...AUTH_TEST_ENV, ...env },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (c: Buffer) => (output += c.toString()));
      child.stderr.on('data', (c: Buffer) => (output += c.toString()));
      child.stdin.end(stdin ?? '');
      child.once('exit', (code) => resolve({ code, output }));
    });
  }

  async function roleOf(username: string, password: string): Promise<string> {
    const service = await compose(testConfig(databaseUrl, AUTH_TEST_ENV), { logger: false });
    try {
      const session = await login(service.app, username, password);
      return (await me(service.app, session.cookie)).json<{ role: string }>().role;
    } finally {
      await service.close();
    }
  }

  it('creates an administrator with the password from ADMIN_PASSWORD', async () => {
    const result = await cli(['create-admin', '--username', 'boss', '--email', 'Boss@Example.com'], {
      ADMIN_PASSWORD: 'boss password 1',
    });
    expect(result.output).toMatch(/administrator boss created/);
    expect(result.code).toBe(0);
    expect(await roleOf('boss', 'boss password 1')).toBe('admin');
  });

  it('reads the password from stdin', async () => {
    const result = await cli(
      ['create-admin', '--username', 'boss2', '--email', 'boss2@example.com'],
      {},
      'stdin password 1\n',
    );
    expect(result.code, result.output).toBe(0);
    expect(await roleOf('boss2', 'stdin password 1')).toBe('admin');
  });

  it('refuses a taken username, a short password and missing arguments', async () => {
    const taken = await cli(['create-admin', '--username', 'boss', '--email', 'other@example.com'], {
      ADMIN_PASSWORD: 'boss password 1',
    });
    expect(taken.code).toBe(1);
    expect(taken.output).toMatch(/Username already registered/);
    const short = await cli(['create-admin', '--username', 'boss3', '--email', 'b3@example.com'], {
      ADMIN_PASSWORD: 'short',
    });
    expect(short.code).toBe(1);
    expect(short.output).toMatch(/Password must be at least 8 characters/);
    const missing = await cli(['create-admin', '--username', 'boss4'], { ADMIN_PASSWORD: 'boss password 1' });
    expect(missing.code).toBe(64);
  });
});
