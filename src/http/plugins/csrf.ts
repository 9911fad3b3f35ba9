import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { unverifiedTokenId } from '../../adapters/auth/jwt.js';
import type { CsrfFailureReason, SecurityMetrics } from '../../ports/security-metrics.js';
import { type AppError, errors } from '../../domain/errors.js';
import { AuthService } from '../../services/auth-service.js';
import { decideBeforeRefusal } from './rate-limit.js';
import { addRouteHook } from './route-hooks.js';
import { ACCESS_TOKEN_COOKIE, CSRF_COOKIE } from './session-cookies.js';

export const CSRF_HEADER = 'x-csrf-token';

export const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);
/** Login and register (spec §5.4 step 2), and logout, which skips validation too (spec §4.3). */
export const CSRF_EXEMPT_PATHS: ReadonlySet<string> = new Set([
  '/api/v1/auth/login',
  '/api/v1/auth/register',
  '/api/v1/auth/logout',
]);

/**
 * Whether a browser sent the request from another site. Fetch metadata (`Sec-Fetch-Site`) when the
 * browser sends it, else `Origin` against this request's own origin. A client that sends neither
 * (curl, a server, an old browser's same-origin form) is not a browser page on another site.
 */
export function isCrossSite(request: FastifyRequest): boolean {
  const site = request.headers['sec-fetch-site'];
  if (typeof site === 'string') return site !== 'same-origin' && site !== 'none';
  const origin = request.headers.origin;
  if (origin === undefined) return false;
  try {
    // Parsed, so that a default port written out on one side only still compares equal.
    const own = new URL(`${request.protocol}://${request.host}`);
    const from = new URL(origin);
    return from.protocol !== own.protocol || from.host !== own.host;
  } catch {
    return true; // `null` (a sandboxed frame, a data: URL) or nonsense
  }
}

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
 * Steps 5 to 7 of spec §5.4 for a request that carries the session cookie `accessToken`: why the
 * `X-CSRF-Token` header fails (it must be the session's token and equal the `csrf_token`
 * cookie), or undefined when it passes. The one implementation: the `/api/` scope's hook below
 * and the URL routes' caller identification (src/http/caller.ts) both use it.
 */
export function csrfFailure(
  request: FastifyRequest,
  cookies: Readonly<Record<string, string | undefined>>,
  accessToken: string,
  auth: AuthService,
): CsrfFailureReason | undefined {
  // 5. The header must be there.
  const header = request.headers[CSRF_HEADER];
  if (header === undefined) return 'missing_header';
  // 6. It must equal the cookie (constant time), neither empty.
  const cookie = cookies[CSRF_COOKIE];
  if (typeof header !== 'string' || header === '' || !cookie || !AuthService.sameCsrfValue(header, cookie)) {
    return 'token_mismatch';
  }
  // 7. It must be signed for this session.
  const jti = unverifiedTokenId(accessToken);
  if (jti === undefined || !auth.csrfTokenMatchesSession(header, jti)) return 'invalid_signature';
  return undefined;
}

/** A login, registration or logout sent from another site (not one of spec §5.4's failures). */
const CROSS_SITE = 'cross_site';

/**
 * CSRF validation of spec §5.4, step by step in its order. A failure answers 403 with the
 * design's detail and is counted in `csrf_failures_total{reason}`. Token values are never logged.
 * A hook of each route with a method that changes data, after the request's span has started; a
 * refused request gets its rate-limit decision before the refusal, like any other request.
 * Register inside the `/api/` scope only, after @fastify/cookie, before its routes: the redirect
 * path never runs it.
 */
const csrfPlugin: FastifyPluginAsync<CsrfPluginOptions> = async (app, { auth, metrics }) => {
  const check = (request: FastifyRequest): CsrfFailureReason | typeof CROSS_SITE | undefined => {
    // 1. Safe methods change nothing.
    if (SAFE_METHODS.has(request.method)) return;
    // 2. Login, register (and logout) are exempt from the token, which they precede; but a page on
    // another site must not sign the browser in as someone else (login CSRF), sign it up or out.
    if (CSRF_EXEMPT_PATHS.has(request.routeOptions.url ?? '')) return isCrossSite(request) ? CROSS_SITE : undefined;
    // 3. Only paths under /api/ are validated.
    if (!request.url.startsWith('/api/')) return;
    // 4. No session cookie: nothing to forge; authentication answers for itself.
    const accessToken = request.cookies[ACCESS_TOKEN_COOKIE];
    if (accessToken === undefined || accessToken === '') return;
    // 5 to 7.
    return csrfFailure(request, request.cookies, accessToken, auth);
  };

  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    if (methods.every((m) => SAFE_METHODS.has(m.toUpperCase()))) return;
    addRouteHook(route, 'onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      const reason = check(request);
      if (reason === undefined) return;
      if (reason !== CROSS_SITE) metrics.csrfFailure(reason);
      await decideBeforeRefusal(request, reply);
      throw reason === CROSS_SITE ? errors.crossSiteRequest() : FAILURES[reason]();
    });
  });
};

export default fp(csrfPlugin, { name: 'urlshortener-csrf', fastify: '5.x', dependencies: ['@fastify/cookie'] });
