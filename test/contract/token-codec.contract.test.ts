import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { JwtCodec } from '../../src/adapters/auth/jwt.js';
import type { Clock } from '../../src/ports/clock.js';
import type { TokenClaims, TokenCodec } from '../../src/ports/token-codec.js';
import { ManualClock } from '../helpers/auth.js';

const KEY = 'k'.repeat(32);

/** One contract, every token codec (HS256 JWT is the one there is). */
describe.each([{ name: 'jwt', make: (key: string, clock: Clock): TokenCodec => new JwtCodec(key, clock) }])(
  'TokenCodec on $name',
  ({ make }) => {
    const clock = new ManualClock();
    const codec = make(KEY, clock);
    const claims = (lifetimeSeconds = 1800): TokenClaims => {
      const iat = Math.floor(clock.now() / 1000);
      return { sub: 'alice', exp: iat + lifetimeSeconds, iat, jti: randomUUID(), uid: 7, role: 'user' };
    };

    it('verifies what it signed, giving the claims back', () => {
      const given = claims();
      expect(codec.verify(codec.sign(given))).toEqual(given);
      const admin = { ...claims(), sub: 'root', uid: 1, role: 'admin' as const };
      expect(codec.verify(codec.sign(admin))).toEqual(admin);
    });

    it('refuses a token that was changed in any part', () => {
      const token = codec.sign(claims());
      for (let i = 0; i < token.length; i += 7) {
        const flipped = token.slice(0, i) + (token[i] === 'A' ? 'B' : 'A') + token.slice(i + 1);
        if (flipped !== token) expect(codec.verify(flipped), `changed at ${i}`).toBeUndefined();
      }
    });

    it('refuses a token signed under another key', () => {
      expect(make('o'.repeat(32), clock).verify(codec.sign(claims()))).toBeUndefined();
    });

    it('refuses a token once it expires by the clock', () => {
      const token = codec.sign(claims(60));
      clock.advance(59_000);
      expect(codec.verify(token)).toBeDefined();
      clock.advance(1_000);
      expect(codec.verify(token)).toBeUndefined();
    });

    it('answers undefined, without throwing, for anything that is not a token', () => {
      for (const garbage of ['', 'x', 'a.b', 'a.b.c', '...', `${codec.sign(claims())}.extra`, 'é.é.é']) {
        expect(codec.verify(garbage), garbage).toBeUndefined();
      }
    });
  },
);
