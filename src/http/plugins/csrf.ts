import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { unverifiedTokenId } from '../../adapters/auth/jwt.js';
import type { CsrfFailureReason, SecurityMetrics } from '../../ports/security-metrics.js';
import { type AppError, errors } from '../../domain/errors.js';
import { AuthService } from '../../services/auth-service.js';
import { ACCESS_TOKEN_COOKIE, CSRF_COOKIE } from './session-cookies.js';

export const CSRF_HEADER = 'x-csrf-token';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
/** Login and register (spec §5.4 step 2), and logout, which skips validation too (spec §4.3). */
export const CSRF_EXEMPT_PATHS: ReadonlySet<string> = new Set([
  '/api/v1/auth/login',
  '/api/v1/auth/register',
  '/api/v1/auth/logout',
]);

const FAILURES: Record<CsrfFailureReason, () => AppError> = {
  missing_header: errors.csrfMissingHeader,
  token_mismatch: errors.csrfTokenMismatch,
  invalid_signature: errors.csrfInvalidSignature,
};

export interface CsrfPluginOptions {
  readonly auth: AuthService;
  readonly metrics: SecurityMetrics;
}

/**
 * CSRF validation of spec §5.4, step by step in its order. A failure answers 403 with the
 * design's detail and is counted in `csrf_failures_total{reason}`. Token values are never logged.
 * Register inside the `/api/` scope only, after @fastify/cookie: the redirect path never runs it.
 */
const csrfPlugin: FastifyPluginAsync<CsrfPluginOptions> = async (app, { auth, metrics }) => {
  const fail = (reason: CsrfFailureReason): never => {
    metrics.csrfFailure(reason);
    throw FAILURES[reason]();
  };

  app.addHook('onRequest', async (request) => {
    // 1. Safe methods change nothing.
    if (SAFE_METHODS.has(request.method)) return;
    // 2. Login, register (and logout) are exempt.
    if (CSRF_EXEMPT_PATHS.has(request.routeOptions.url ?? '')) return;
    // 3. Only paths under /api/ are validated.
    if (!request.url.startsWith('/api/')) return;
    // 4. No session cookie: nothing to forge; authentication answers for itself.
    const accessToken = request.cookies[ACCESS_TOKEN_COOKIE];
    if (accessToken === undefined || accessToken === '') return;
    // 5. The header must be there.
    const header = request.headers[CSRF_HEADER];
    if (header === undefined) fail('missing_header');
    // 6. It must equal the cookie (constant time), neither empty.
    const cookie = request.cookies[CSRF_COOKIE];
    if (typeof header !== 'string' || header === '' || !cookie || !AuthService.sameCsrfValue(header, cookie)) {
      fail('token_mismatch');
    }
    // 7. It must be signed for this session.
    const jti = unverifiedTokenId(accessToken);
    if (jti === undefined || !auth.csrfTokenMatchesSession(header as string, jti)) fail('invalid_signature');
  });
};

export default fp(csrfPlugin, { name: 'urlshortener-csrf', fastify: '5.x', dependencies: ['@fastify/cookie'] });
