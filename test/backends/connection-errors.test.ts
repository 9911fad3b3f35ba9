import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../src/adapters/storage/connection-errors.js';

const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('isDatabaseUnavailable', () => {
  it('recognises a lost, refused or unobtainable connection', () => {
    for (const code of ['57P01', '57P02', '57P03', '53300', '08006', '08001', 'ECONNREFUSED', 'ECONNRESET']) {
      expect(isDatabaseUnavailable(withCode(code)), code).toBe(true);
    }
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('timeout exceeded when trying to connect'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('Client has encountered a connection error and is not queryable'))).toBe(
      true,
    );
    // Node reports a refused dual-stack connect as an AggregateError of both attempts.
    expect(isDatabaseUnavailable(new AggregateError([withCode('ECONNREFUSED')], ''))).toBe(true);
    expect(isDatabaseUnavailable(new Error('batch failed', { cause: withCode('57P01') }))).toBe(true);
  });

  it('leaves statement errors alone', () => {
    for (const code of ['23505', '42P01', '22P02', '40001', 'SQLITE_BUSY']) {
      expect(isDatabaseUnavailable(withCode(code)), code).toBe(false);
    }
    expect(isDatabaseUnavailable(new Error('syntax error'))).toBe(false);
    expect(isDatabaseUnavailable(undefined)).toBe(false);
    expect(isDatabaseUnavailable('Connection terminated')).toBe(false);
  });
});
