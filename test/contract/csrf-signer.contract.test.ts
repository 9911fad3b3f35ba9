import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CsrfTokens } from '../../src/adapters/auth/csrf.js';
import type { CsrfSigner } from '../../src/ports/csrf-signer.js';

/** One contract, every CSRF signer (HMAC signed double-submit tokens are the one there is). */
describe.each([{ name: 'hmac', make: (key: string): CsrfSigner => new CsrfTokens(key) }])(
  'CsrfSigner on $name',
  ({ make }) => {
    const signer = make('k'.repeat(32));
    const session = randomUUID();

    it('verifies a token for the session it was issued for', () => {
      expect(signer.verify(signer.issue(session), session)).toBe(true);
    });

    it('issues a different token each time, each of them valid', () => {
      const tokens = Array.from({ length: 5 }, () => signer.issue(session));
      expect(new Set(tokens).size).toBe(5);
      for (const token of tokens) expect(signer.verify(token, session)).toBe(true);
    });

    it('refuses a token issued for another session, or under another key', () => {
      const token = signer.issue(session);
      expect(signer.verify(token, randomUUID())).toBe(false);
      expect(make('o'.repeat(32)).verify(token, session)).toBe(false);
    });

    it('refuses a changed token and anything that is not one, without throwing', () => {
      const token = signer.issue(session);
      for (let i = 0; i < token.length; i += 5) {
        const flipped = token.slice(0, i) + (token[i] === 'A' ? 'B' : 'A') + token.slice(i + 1);
        if (flipped !== token) expect(signer.verify(flipped, session), `changed at ${i}`).toBe(false);
      }
      for (const garbage of ['', '.', 'a.b', `${token}.x`, token.replace('.', '')]) {
        expect(signer.verify(garbage, session), garbage).toBe(false);
      }
    });
  },
);
