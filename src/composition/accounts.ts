import { BcryptPasswordHasher } from '../adapters/auth/bcrypt-password-hasher.js';
import { CsrfTokens } from '../adapters/auth/csrf.js';
import { JwtCodec } from '../adapters/auth/jwt.js';
import { resolveSecretKey } from '../adapters/auth/secret-key.js';
import { createSecurityMetrics } from '../adapters/auth/security-metrics.js';
import type { Database } from '../adapters/storage/database.js';
import { KyselyApiKeyRepository } from '../adapters/storage/kysely-api-key-repository.js';
import { KyselySettingsRepository } from '../adapters/storage/kysely-settings-repository.js';
import { KyselyUserRepository } from '../adapters/storage/kysely-user-repository.js';
import { AUTH_SETTINGS, LINK_SETTINGS, RATE_LIMIT_SETTINGS } from '../domain/settings.js';
import type { SecurityMetrics } from '../ports/security-metrics.js';
import { ApiKeyService } from '../services/api-key-service.js';
import { AuthService } from '../services/auth-service.js';
import { UserAdminService } from '../services/user-admin-service.js';
import { LoginThrottle } from '../services/login-throttle.js';
import { RateLimitPolicies } from '../services/rate-limit-policies.js';
import { RuntimeSettings } from '../services/runtime-settings.js';
import type { CompositionContext } from './context.js';
import type { SharedState } from './shared-state.js';

/** How often each instance polls for runtime-settings changes by default (within 1 s is promised). */
const SETTINGS_POLL_INTERVAL_MS = 250;

export interface Accounts {
  readonly runtimeSettings: RuntimeSettings;
  /** The rate-limit policies in force, following the runtime settings. */
  readonly rateLimitPolicies: RateLimitPolicies;
  readonly securityMetrics: SecurityMetrics;
  readonly auth: AuthService;
  /** Users' API keys: create, list, revoke (verification is `auth`'s). */
  readonly apiKeys: ApiKeyService;
  /** Administrators' user management. */
  readonly userAdmin: UserAdminService;
}

/**
 * The account side: runtime settings (account settings and rate-limit values, env values until
 * an administrator changes them), users, tokens, and the ADMIN_* administrator.
 */
export async function composeAccounts(
  context: CompositionContext,
  database: Database,
  shared: SharedState,
  settingsPollIntervalMs = SETTINGS_POLL_INTERVAL_MS,
): Promise<Accounts> {
  const { config, logger, stack, clock, metrics } = context;
  const runtimeSettings = new RuntimeSettings({
    definitions: [...Object.values(AUTH_SETTINGS), ...RATE_LIMIT_SETTINGS, ...Object.values(LINK_SETTINGS)],
    defaults: {
      ...config.auth.defaults,
      ...RateLimitPolicies.defaults(config.rateLimit),
      link_write_policy: config.links.writePolicy,
    },
    repository: new KyselySettingsRepository(database.db),
    // Counters of this process alone carry no signal to the others: the database's version does.
    counters: shared.countersShared ? shared.counters : undefined,
    clock,
    pollIntervalMs: settingsPollIntervalMs,
    logger,
  });
  stack.defer('runtime settings', () => runtimeSettings.stop());
  await runtimeSettings.start();
  const rateLimitPolicies = new RateLimitPolicies(config.rateLimit);
  // The stored rate-limit settings now, and every change from any instance from now on.
  rateLimitPolicies.follow(runtimeSettings);

  const secretKey = resolveSecretKey(config.auth);
  const securityMetrics = createSecurityMetrics(metrics.registry);
  const users = new KyselyUserRepository(database.db, database.dialect);
  const apiKeyRepository = new KyselyApiKeyRepository(database.db);
  const auth = new AuthService({
    users,
    apiKeys: apiKeyRepository,
    passwords: new BcryptPasswordHasher(config.auth.bcryptRounds),
    state: shared.authState,
    settings: runtimeSettings,
    tokens: new JwtCodec(secretKey, clock),
    csrf: new CsrfTokens(secretKey),
    clock,
    metrics: securityMetrics,
    accessTokenMinutes: config.auth.accessTokenMinutes,
    throttle: new LoginThrottle(shared.counters, config.loginThrottle, (error) =>
      logger.debug({ err: error }, 'login throttle unavailable: admitting'),
    ),
  });
  const { username, email, password } = config.auth.admin;
  if (username !== undefined && email !== undefined && password !== undefined) {
    if (await auth.ensureAdmin({ username, email, password })) {
      logger.info({ username }, 'administrator created from ADMIN_USERNAME');
    }
  }
  const apiKeys = new ApiKeyService({ keys: apiKeyRepository, clock });
  const userAdmin = new UserAdminService({ users, state: shared.authState, clock });
  return { runtimeSettings, rateLimitPolicies, securityMetrics, auth, apiKeys, userAdmin };
}
