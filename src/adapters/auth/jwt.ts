import { createHmac, timingSafeEqual } from 'node:crypto';
import { ROLES } from '../../domain/user.js';
import type { Clock } from '../../ports/clock.js';
import type { TokenClaims, TokenCodec } from '../../ports/token-codec.js';

const HEADER = base64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
/** Tolerated clock difference between instances for `iat`, in seconds. */
const IAT_LEEWAY_SECONDS = 60;

function base64url(text: string | Buffer): string {
  return Buffer.from(text).toString('base64url');
}

function parseSegment(segment: string): unknown {
  if (!/^[A-Za-z0-9_-]+$/.test(segment)) return undefined;
  try {
    return JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Exactly `{"alg":"HS256","typ":"JWT"}`: `none`, other algorithms and extra fields (`kid`, `jku`, …) are refused. */
function isExpectedHeader(value: unknown): boolean {
  if (!isRecord(value)) return false;
  const keys = Object.keys(value).sort();
  return keys.length === 2 && keys[0] === 'alg' && keys[1] === 'typ' && value.alg === 'HS256' && value.typ === 'JWT';
}

function isClaims(value: unknown): value is TokenClaims {
  return (
    isRecord(value) &&
    typeof value.sub === 'string' &&
    value.sub !== '' &&
    Number.isSafeInteger(value.exp) &&
    Number.isSafeInteger(value.iat) &&
    typeof value.jti === 'string' &&
    value.jti !== '' &&
    Number.isSafeInteger(value.uid) &&
    (ROLES as readonly unknown[]).includes(value.role)
  );
}

/**
 * HS256 JSON Web Tokens with node:crypto. Only HS256 is accepted, the signature is compared in
 * constant time, and `exp` and `iat` are checked against the clock.
 */
export class JwtCodec implements TokenCodec {
  private readonly key: Buffer;

  constructor(
    secretKey: string,
    private readonly clock: Clock,
  ) {
    this.key = Buffer.from(secretKey, 'utf8');
  }

  sign(claims: TokenClaims): string {
    const body = `${HEADER}.${base64url(JSON.stringify(claims))}`;
    return `${body}.${this.signature(body)}`;
  }

  /** The claims of a genuine, unexpired token; undefined for anything else. */
  verify(token: string): TokenClaims | undefined {
    const parts = token.split('.');
    if (parts.length !== 3) return undefined;
    const [header, payload, signature] = parts as [string, string, string];
    if (!isExpectedHeader(parseSegment(header))) return undefined;
    const expected = Buffer.from(this.signature(`${header}.${payload}`), 'ascii');
    const given = Buffer.from(signature, 'ascii');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    const claims = parseSegment(payload);
    if (!isClaims(claims)) return undefined;
    const now = Math.floor(this.clock.now() / 1000);
    if (claims.exp <= now || claims.iat > now + IAT_LEEWAY_SECONDS) return undefined;
    return claims;
  }

  private signature(body: string): string {
    return createHmac('sha256', this.key).update(body).digest('base64url');
  }
}

/**
 * The `jti` a token claims, without verifying it. Only for binding a CSRF token to the session it
 * was issued for: forging a CSRF token still needs the server's key, and the session itself is
 * verified separately.
 */
export function unverifiedTokenId(token: string): string | undefined {
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  const payload = parseSegment(parts[1]!);
  return isRecord(payload) && typeof payload.jti === 'string' && payload.jti !== '' ? payload.jti : undefined;
}
