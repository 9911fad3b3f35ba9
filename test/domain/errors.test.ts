import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { AppError, type ErrorCode, errors } from '../../src/domain/errors.js';

describe('the error table', () => {
  it('gives each named constructor a code of its own', () => {
    const codes = Object.values(errors).map((make) => make.code);
    expect(new Set(codes).size).toBe(codes.length);
  });

  it('types the codes as a union of the rows', () => {
    expectTypeOf(errors.mappingNotFound().code).toEqualTypeOf<'MAPPING_NOT_FOUND'>();
    expectTypeOf<'MAPPING_NOT_FOUND'>().toExtend<ErrorCode>();
    expectTypeOf<'NO_SUCH_CODE'>().not.toExtend<ErrorCode>();
  });

  it('answers with the status, detail and headers of its row', () => {
    expect(errors.accountLocked(30)).toMatchObject({
      code: 'ACCOUNT_LOCKED',
      statusCode: 423,
      detail: 'Account locked due to too many failed attempts',
      headers: { 'retry-after': '30' },
    });
    expect(errors.mappingNotFound().code).toBe(errors.mappingNotFound.code);
    expect(errors.mappingNotFound()).toMatchObject({ statusCode: 404, detail: 'URL mapping not found', headers: {} });
  });

  it("keeps the framework's own status for a request it rejected", () => {
    const error = errors.requestRejected(414, 'URI too long');
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ code: 'REQUEST_REJECTED', statusCode: 414, detail: 'URI too long' });
  });

  it('is the only place an AppError is built', () => {
    const src = new URL('../../src/', import.meta.url).pathname;
    const building = (readdirSync(src, { recursive: true }) as string[])
      .filter((file) => file.endsWith('.ts') && file !== join('domain', 'errors.ts'))
      .filter((file) => /new AppError\b/.test(readFileSync(join(src, file), 'utf8')));
    expect(building).toEqual([]);
  });
});
