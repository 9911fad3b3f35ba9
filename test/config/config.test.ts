import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, SETTINGS, settingsMarkdown } from '../../src/config/config.js';
import { runCli } from '../helpers/server-process.js';

describe('configuration', () => {
  it('has working defaults: embedded SQLite under ./data, port 8000, loopback', () => {
    const config = loadConfig({});
    expect(config.database).toEqual({ kind: 'sqlite', url: './data/urlshortener.db', poolMax: 1 });
    expect(config.port).toBe(8000);
    expect(config.host).toBe('127.0.0.1');
    expect(config.bodyLimit).toBe(1024 * 1024);
    expect(config.urls).toEqual({ maxLength: 2048, allowedSchemes: ['http', 'https'] });
    expect(config.redirect.cacheControl).toBe('private, max-age=0');
  });

  it('reads PostgreSQL URLs, pool size, connection deadline, start deadline, idle-in-transaction timeout and unanswered-statement check', () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://u@db:5432/x', DB_POOL_MAX: '4' });
    expect(config.database).toEqual({
      kind: 'postgres',
      url: 'postgres://u@db:5432/x',
      poolMax: 4,
      connectTimeoutMs: 3000,
      startTimeoutMs: 30_000,
      idleInTransactionTimeoutMs: 30_000,
      unansweredCheckMs: 5000,
    });
    const custom = loadConfig({
      DATABASE_URL: 'postgres://u@db:5432/x',
      DB_CONNECT_TIMEOUT_MS: '750',
      DB_START_TIMEOUT_MS: '0',
      DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '0',
      DB_UNANSWERED_CHECK_MS: '0',
    });
    expect(custom.database).toMatchObject({
      connectTimeoutMs: 750,
      startTimeoutMs: 0,
      idleInTransactionTimeoutMs: 0,
      unansweredCheckMs: 0,
    });
    expect(() => loadConfig({ DB_CONNECT_TIMEOUT_MS: '0' })).toThrow(ConfigError);
    expect(() => loadConfig({ DB_START_TIMEOUT_MS: '-1' })).toThrow(ConfigError);
    expect(() => loadConfig({ DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '-1' })).toThrow(ConfigError);
    expect(() => loadConfig({ DB_UNANSWERED_CHECK_MS: '-1' })).toThrow(ConfigError);
    expect(() => loadConfig({ DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '1.5' })).toThrow(ConfigError);
  });

  it('flushes visits with the clicks unless VISIT_FLUSH_INTERVAL_MS says otherwise', () => {
    expect(loadConfig({}).visits.flushIntervalMs).toBe(500);
    expect(loadConfig({ CLICK_FLUSH_INTERVAL_MS: '250' }).visits.flushIntervalMs).toBe(250);
    expect(loadConfig({ CLICK_FLUSH_INTERVAL_MS: '250', VISIT_FLUSH_INTERVAL_MS: ' ' }).visits.flushIntervalMs).toBe(
      250,
    );
    const apart = loadConfig({ CLICK_FLUSH_INTERVAL_MS: '250', VISIT_FLUSH_INTERVAL_MS: '5000' });
    expect(apart.visits.flushIntervalMs).toBe(5000);
    expect(apart.redirect.clickFlushIntervalMs).toBe(250);
  });

  it('is frozen', () => {
    const config = loadConfig({});
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.urls.allowedSchemes)).toBe(true);
  });

  it('names every bad variable at once', () => {
    let error: unknown;
    try {
      loadConfig({ PORT: 'eighty', LOG_LEVEL: 'loud', DATABASE_URL: 'mysql://x', URL_ALLOWED_SCHEMES: ' , ' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const { problems } = error as ConfigError;
    expect(problems).toHaveLength(4);
    expect(problems.join('\n')).toMatch(/PORT="eighty": must be an integer from 0 to 65535/);
    expect(problems.join('\n')).toMatch(/LOG_LEVEL="loud"/);
    expect(problems.join('\n')).toMatch(/DATABASE_URL="mysql:\/\/x": must start with sqlite: or postgres:\/\//);
    expect(problems.join('\n')).toMatch(/URL_ALLOWED_SCHEMES/);
  });

  it.each([
    ['PORT', '70000'],
    ['PORT', '-1'],
    ['BODY_LIMIT', '0'],
    ['URL_MAX_LENGTH', '1.5'],
    ['TRUST_PROXY', 'maybe'],
    ['REDIRECT_CACHE_CONTROL', 'no-store\r\nX-Evil: 1'],
    ['URL_ALLOWED_SCHEMES', 'http,ht tp'],
    ['DATABASE_URL', 'sqlite:'],
    ['CLICK_FLUSH_INTERVAL_MS', '5'],
    ['VISIT_FLUSH_INTERVAL_MS', '5'],
    ['VISIT_FLUSH_INTERVAL_MS', 'soon'],
  ])('refuses %s=%j', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(name));
  });

  it('documents every setting in the generated table', () => {
    const table = settingsMarkdown();
    for (const setting of Object.values(SETTINGS)) expect(table).toContain(`\`${setting.name}\``);
  });

  it('the CLI refuses to start on a bad setting, naming it, with exit code 78', async () => {
    const { code, output } = await runCli(['serve'], { PORT: 'abc' });
    expect(code).toBe(78);
    expect(output).toContain('PORT="abc"');
  });
});
