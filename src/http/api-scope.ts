import cookie from '@fastify/cookie';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { SecurityMetrics } from '../ports/security-metrics.js';
import type { ApiKeyService } from '../services/api-key-service.js';
import type { AuthService } from '../services/auth-service.js';
import type { UserAdminService } from '../services/user-admin-service.js';
import type { RuntimeSettings } from '../services/runtime-settings.js';
import authPlugin from './plugins/auth.js';
import csrfPlugin from './plugins/csrf.js';
import { noStore } from './plugins/security-headers.js';
import { adminSettingsRoutes } from './routes/admin-settings.js';
import { adminUserRoutes } from './routes/admin-users.js';
import { apiKeyRoutes } from './routes/api-keys.js';
import { authRoutes } from './routes/auth.js';
import { deadLetterRoutes } from './routes/dead-letters.js';
import { executionRoutes } from './routes/executions.js';
import { linkRoutes } from './routes/links.js';
import { linkStatsRoutes } from './routes/link-stats.js';
import { linkTransferRoutes } from './routes/link-transfer.js';
import { notificationChannelRoutes } from './routes/notification-channels.js';
import type { DeadLetterManager } from '../services/dead-letter-manager.js';
import type { ExecutionService } from '../services/execution-service.js';
import type { NotificationService } from '../services/notification-service.js';
import type { UrlMappingService } from '../services/url-mapping-service.js';
import type { VisitStatsService } from '../services/visit-stats-service.js';
import type { LinkTransferService } from '../services/link-transfer-service.js';

export interface ApiScopeOptions {
  readonly auth: AuthService;
  readonly apiKeys: ApiKeyService;
  readonly userAdmin: UserAdminService;
  readonly settings: RuntimeSettings;
  readonly securityMetrics: SecurityMetrics;
  readonly executions: ExecutionService;
  readonly notifications: NotificationService;
  readonly deadLetters: DeadLetterManager;
  readonly urlMappings: UrlMappingService;
  readonly visitStats: VisitStatsService;
  readonly linkTransfer: LinkTransferService;
  /** IMPORT_BODY_LIMIT. */
  readonly importBodyLimit: number;
}

/**
 * Everything that needs a session — every route under `/api/`, and `POST /execute`: cookie parsing, CSRF validation (spec §5.4) and authentication are
 * hooks of this encapsulated scope only, so the redirect path and the other root routes never run
 * them. Routes under `/api/` belong in here.
 */
export const apiScope: FastifyPluginAsyncTypebox<ApiScopeOptions> = async (api, options) => {
  // Session answers are personal (and login's and /me's carry the CSRF token): never cached.
  api.addHook('onRequest', noStore);
  await api.register(cookie);
  await api.register(csrfPlugin, { auth: options.auth, metrics: options.securityMetrics });
  await api.register(authPlugin, { auth: options.auth });
  await api.register(authRoutes, { prefix: '/api/v1/auth', auth: options.auth });
  await api.register(apiKeyRoutes, { prefix: '/api/v1/auth', apiKeys: options.apiKeys });
  await api.register(linkRoutes, {
    prefix: '/api/v1',
    service: options.urlMappings,
    callers: { auth: options.auth },
  });
  await api.register(linkStatsRoutes, { prefix: '/api/v1', stats: options.visitStats });
  await api.register(linkTransferRoutes, {
    prefix: '/api/v1',
    transfer: options.linkTransfer,
    importBodyLimit: options.importBodyLimit,
  });
  await api.register(adminSettingsRoutes, { prefix: '/api/v1/admin', settings: options.settings });
  await api.register(adminUserRoutes, {
    prefix: '/api/v1/admin',
    userAdmin: options.userAdmin,
    settings: options.settings,
  });
  await api.register(deadLetterRoutes, { prefix: '/api/v1/admin', deadLetters: options.deadLetters });
  await api.register(notificationChannelRoutes, {
    prefix: '/api/v1/notifications',
    notifications: options.notifications,
  });
  // `POST /execute` sits outside /api/ (spec §4.3) but needs the session: CSRF skips it (step 3).
  await api.register(executionRoutes, { executions: options.executions });
};
