/**
 * An object whose properties are read from `read()` when used, its methods bound to it: a suite
 * names at collection what its `beforeAll` makes, and its tests use the name as the thing itself.
 */
export function lazy<T extends object>(read: () => T): T {
  return new Proxy({} as T, {
    get(_target, key) {
      const target = read();
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
