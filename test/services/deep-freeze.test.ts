import { describe, expect, it } from 'vitest';
import { deepFreeze } from '../../src/support/deep-freeze.js';

describe('deepFreeze', () => {
  it('freezes an object, its arrays and the objects they hold, and answers the same object', () => {
    const value = { a: { b: [1, { c: 'x' }] }, d: null, e: 'text' };
    expect(deepFreeze(value)).toBe(value);
    expect(Object.isFrozen(value)).toBe(true);
    expect(Object.isFrozen(value.a)).toBe(true);
    expect(Object.isFrozen(value.a.b)).toBe(true);
    expect(Object.isFrozen(value.a.b[1])).toBe(true);
  });

  it('ends on a cycle, and passes primitives through', () => {
    const cyclic: { self?: unknown; inner: { back?: unknown } } = { inner: {} };
    cyclic.self = cyclic;
    cyclic.inner.back = cyclic;
    expect(deepFreeze(cyclic)).toBe(cyclic);
    expect(Object.isFrozen(cyclic.inner)).toBe(true);
    expect(deepFreeze(3)).toBe(3);
    expect(deepFreeze(null)).toBe(null);
  });
});
