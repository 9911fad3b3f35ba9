import { createHash, timingSafeEqual } from 'node:crypto';

/** Compares two secrets in constant time whatever their lengths (both are hashed first). */
export function constantTimeEqual(a: string, b: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(digest(a), digest(b));
}
