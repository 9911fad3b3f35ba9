import { createHash, randomUUID } from 'node:crypto';
import { type ApiKey, API_KEY_LAST_USED_RESOLUTION_MS, apiKeyUsable, looksLikeApiKey } from '../domain/api-key.js';
import { AppError, errors } from '../domain/errors.js';
import type { AuthSettingValues } from '../domain/settings.js';
import { canonicalTimestamp } from '../domain/timestamp.js';
import {
  assertPasswordAcceptable,
  isValidEmail,
  isValidUsername,
  normaliseEmail,
  PASSWORD_MAX_BYTES,
  passwordBytes,
  type Role,
  type User,
} from '../domain/user.js';
import type { ApiKeyRepository } from '../ports/api-key-repository.js';
import type { AuthStateStore } from '../ports/auth-state-store.js';
import type { Clock } from '../ports/clock.js';
import type { CsrfSigner } from '../ports/csrf-signer.js';
import type { PasswordHasher } from '../ports/password-hasher.js';
import type { SecurityMetrics } from '../ports/security-metrics.js';
import type { TokenClaims, TokenCodec } from '../ports/token-codec.js';
import type { UserRepository } from '../ports/user-repository.js';
import type { LoginThrottle } from './login-throttle.js';
import { constantTimeEqual } from '../support/constant-time.js';

export interface AuthServiceOptions {
  readonly users: UserRepository;
  /** API keys, read on every bearer request (so a revocation holds on every instance at once). */
  readonly apiKeys: ApiKeyRepository;
  readonly passwords: PasswordHasher;
  /** Revocations and lockouts: in the database, shared by every instance, kept across restarts. */
  readonly state: AuthStateStore;
  readonly settings: { current(): AuthSettingValues };
  readonly tokens: TokenCodec;
  readonly csrf: CsrfSigner;
  readonly clock: Clock;
  readonly metrics: SecurityMetrics;
  /** ACCESS_TOKEN_EXPIRE_MINUTES: token lifetime, and the cookies' Max-Age. */
  readonly accessTokenMinutes: number;
  /** Failed logins per client address (LOGIN_ADDRESS_*), besides the per-username lockout. */
  readonly throttle?: LoginThrottle;
}

export interface Registration {
  readonly username: string;
  readonly email: string;
  readonly password: string;
}

/**
 * An authenticated request: the user as stored now, and either the session token's claims (a
 * cookie session) or the API key (a bearer request, which has no claims and no CSRF token).
 */
export interface Session {
  readonly user: User;
  readonly claims?: TokenClaims;
  readonly apiKey?: ApiKey;
}

/** The SHA-256 of an API key, hex: how keys are stored and found (the key itself never is). */
export function apiKeyHash(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export interface LoginResult {
  readonly user: User;
  readonly accessToken: string;
  readonly csrfToken: string;
}

/** Register, log in, authenticate, log out: spec §5 and the design's "Accounts". */
export class AuthService {
  constructor(private readonly options: AuthServiceOptions) {}

  /** Cookie and token lifetime, in seconds. */
  get sessionSeconds(): number {
    return this.options.accessTokenMinutes * 60;
  }

  /**
   * Creates a `user`. Check order (after the body's shape): password length (400), username taken
   * (409), email taken (409).
   */
  register(input: Registration): Promise<User> {
    return this.createUser(input, 'user');
  }

  /** Creates a user of any role; also the path of `create-admin` and the ADMIN_* bootstrap. */
  async createUser(input: Registration, role: Role): Promise<User> {
    if (!isValidUsername(input.username)) {
      throw errors.validation(`'username' must be 3 to 32 characters of letters, digits, '_', '.' and '-'`);
    }
    const email = normaliseEmail(input.email);
    if (!isValidEmail(email)) throw errors.validation(`'email' must be a valid email address`);
    assertPasswordAcceptable(input.password, this.options.settings.current().password_min_length);
    const { users, passwords } = this.options;
    if (await users.usernameTaken(input.username)) throw errors.usernameTaken();
    if (await users.emailTaken(email)) throw errors.emailTaken();
    const now = this.timestamp();
    return users.create({
      username: input.username,
      email,
      role,
      password_hash: await passwords.hash(input.password),
      created_at: now,
      updated_at: now,
    });
  }

  /**
   * Creates the administrator named by ADMIN_* unless that username exists already (in which
   * case nothing changes). Returns whether it was created.
   */
  async ensureAdmin(input: Registration): Promise<boolean> {
    if (await this.options.users.usernameTaken(input.username)) return false;
    try {
      await this.createUser(input, 'admin');
      return true;
    } catch (error) {
      // Another instance created it at the same moment.
      if (error instanceof AppError && error.code === 'USERNAME_TAKEN') return false;
      throw error;
    }
  }

  /**
   * Verifies the credentials. Failures are counted per username (sliding window); once the count
   * reaches `max_login_attempts`, every attempt answers 423 until `lockout_duration_minutes` after
   * the last failure, right password or not. Unknown usernames are counted the same way and
   * checked against a dummy hash, so neither the answer nor its timing tells them apart.
   * Before that, a client `address` with too many recent failures is refused with 429 (LoginThrottle).
   */
  async login(username: string, password: string, address?: string): Promise<LoginResult> {
    const { state, users, passwords, metrics, throttle } = this.options;
    const settings = this.options.settings.current();
    const wait = address === undefined ? undefined : await throttle?.refusal(address);
    if (wait !== undefined) {
      metrics.loginFailure('throttled');
      throw errors.loginThrottled(wait);
    }
    const failures = await state.failures(username);
    if (failures !== undefined && failures.count >= settings.max_login_attempts) {
      metrics.loginFailure('locked');
      throw errors.accountLocked(Math.max(1, Math.ceil(failures.ttlMs / 1000)));
    }

    const user = await users.findByUsername(username);
    // bcrypt would ignore everything after 72 bytes; such a password never matches, but costs the same.
    const acceptable = passwordBytes(password) <= PASSWORD_MAX_BYTES;
    const matches = await passwords.verify(acceptable ? password : '', user?.password_hash ?? passwords.dummyHash);
    if (!user || !acceptable || !matches) {
      const { count } = await state.recordFailure(username, settings.lockout_duration_minutes * 60_000);
      if (address !== undefined) await throttle?.recordFailure(address);
      metrics.loginFailure('invalid_credentials');
      if (count === settings.max_login_attempts) metrics.lockout();
      throw errors.invalidCredentials();
    }

    if (failures !== undefined) await state.clearFailures(username);
    // Only after the password matched: a disabled account is not revealed to a guesser.
    if (user.disabled) throw errors.accountDisabled();
    const { password_hash: _hash, ...publicUser } = user;
    const claims = this.newClaims(publicUser);
    return {
      user: publicUser,
      accessToken: this.options.tokens.sign(claims),
      csrfToken: this.options.csrf.issue(claims.jti),
    };
  }

  /** The session of a genuine, unexpired, unrevoked token whose user still exists; else undefined. */
  async authenticate(token: string): Promise<Session | undefined> {
    const claims = this.options.tokens.verify(token);
    if (!claims) return undefined;
    if (await this.options.state.isRevoked('token', claims.jti)) return undefined;
    const user = await this.options.users.findById(claims.uid);
    if (!user || user.username !== claims.sub || user.disabled) return undefined;
    // Issued before the account was last disabled (compared in whole seconds, as `iat` is).
    if (user.sessions_not_before !== null && claims.iat < Math.floor(Date.parse(user.sessions_not_before) / 1000)) {
      return undefined;
    }
    return { user, claims };
  }

  /**
   * The session of a bearer API key that exists, is neither revoked nor expired, and whose user is
   * enabled; else undefined. The key row and the user are read from the database on every call
   * (as a session re-reads its user), so a revocation, an expiry or a disabled user is in force on
   * every instance at once and after a restart. The lookup is by SHA-256 of the key through a
   * unique index: nothing is compared byte by byte against the secret. `last_used_at` is written
   * at most once a minute per key.
   */
  async authenticateApiKey(key: string): Promise<Session | undefined> {
    if (!looksLikeApiKey(key)) return undefined;
    const { apiKeys, users, clock } = this.options;
    const apiKey = await apiKeys.findByHash(apiKeyHash(key));
    const now = clock.now();
    if (!apiKey || !apiKeyUsable(apiKey, now)) return undefined;
    const user = await users.findById(apiKey.user_id);
    if (!user || user.disabled) return undefined;
    if (apiKey.last_used_at === null || now - Date.parse(apiKey.last_used_at) >= API_KEY_LAST_USED_RESOLUTION_MS) {
      await apiKeys.touch(apiKey.id, this.timestamp());
    }
    return { user, apiKey };
  }

  /** Revokes the token on every instance until it would have expired. Unusable tokens are ignored. */
  async logout(token: string | undefined): Promise<void> {
    const claims = token === undefined ? undefined : this.options.tokens.verify(token);
    if (!claims) return;
    await this.options.state.revoke('token', claims.jti, claims.exp * 1000);
  }

  /** The session's CSRF token: `current` (the cookie) when it belongs to this session, else a new one. */
  csrfTokenFor(
    session: Session,
    current: string | undefined,
  ): { token: string; renewed: boolean; maxAgeSeconds: number } {
    // A bearer request has no cookie to protect: no CSRF token.
    if (session.claims === undefined) return { token: '', renewed: false, maxAgeSeconds: 0 };
    const maxAgeSeconds = Math.max(0, session.claims.exp - Math.floor(this.options.clock.now() / 1000));
    if (current !== undefined && this.options.csrf.verify(current, session.claims.jti)) {
      return { token: current, renewed: false, maxAgeSeconds };
    }
    return { token: this.options.csrf.issue(session.claims.jti), renewed: true, maxAgeSeconds };
  }

  /** Step 7 of spec §5.4: whether `csrfToken` was issued for the session `jti`. */
  csrfTokenMatchesSession(csrfToken: string, jti: string): boolean {
    return this.options.csrf.verify(csrfToken, jti);
  }

  /** Step 6 of spec §5.4, in constant time. */
  static sameCsrfValue(header: string, cookie: string): boolean {
    return constantTimeEqual(header, cookie);
  }

  private newClaims(user: User): TokenClaims {
    const iat = Math.floor(this.options.clock.now() / 1000);
    return {
      sub: user.username,
      exp: iat + this.sessionSeconds,
      iat,
      jti: randomUUID(),
      uid: user.id,
      role: user.role,
    };
  }

  private timestamp(): string {
    return canonicalTimestamp(new Date(this.options.clock.now()).toISOString())!;
  }
}
