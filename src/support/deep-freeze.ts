/**
 * Freezes `value` and everything it holds. An object frozen already is left as it is, with what
 * it holds (so a shared or cyclic part is walked once).
 */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
