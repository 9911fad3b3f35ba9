import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { errors } from '../../domain/errors.js';
import type { AuthService, Session } from '../../services/auth-service.js';
import { decideBeforeRefusal } from './rate-limit.js';
import { addRouteHook } from './route-hooks.js';
import { ACCESS_TOKEN_COOKIE } from './session-cookies.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated session, on routes that declare `config.auth`; null elsewhere. */
    session: Session | null;
  }
  interface FastifyContextConfig {
    /** Who may call the route: any signed-in user, or administrators only. */
    auth?: 'user' | 'admin';
  }
}

export interface AuthPluginOptions {
  readonly auth: AuthService;
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/** The API key of an `Authorization: Bearer <key>` header, if the request has one. */
export function bearerKey(request: FastifyRequest): string | undefined {
  const authorization = request.headers.authorization;
  return authorization === undefined ? undefined : BEARER.exec(authorization)?.[1];
}

/**
 * The caller's session, from `Authorization: Bearer <API key>` when that header is there (a bad
 * key is no session, whatever cookie comes with it), else from the `access_token` cookie.
 * Undefined for an anonymous or unauthenticated request. Needs @fastify/cookie.
 */
export async function resolveSession(request: FastifyRequest, auth: AuthService): Promise<Session | undefined> {
  if (request.headers.authorization !== undefined) {
    const key = bearerKey(request);
    return key === undefined ? undefined : auth.authenticateApiKey(key);
  }
  const token = request.cookies[ACCESS_TOKEN_COOKIE];
  return token ? auth.authenticate(token) : undefined;
}

/**
 * Authentication for routes that declare `config.auth`: by an API key (`Authorization: Bearer`)
 * or by the JWT in the `access_token` cookie. No valid session → 401 `Not authenticated`; a user
 * on an admin route → 403.
 * A hook of each such route, after the request's span has started (so a refusal has its span), and
 * a refused request gets its rate-limit decision before the refusal, like any other request.
 * Register inside the `/api/` scope only, after @fastify/cookie, before its routes.
 */
const authPlugin: FastifyPluginAsync<AuthPluginOptions> = async (app, { auth }) => {
  app.decorateRequest('session', null);
  app.addHook('onRoute', (route) => {
    const required = route.config?.auth;
    if (required === undefined) return;
    addRouteHook(route, 'onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      const session = await resolveSession(request, auth);
      if (!session) {
        await decideBeforeRefusal(request, reply);
        throw errors.notAuthenticated(request.headers.authorization === undefined ? undefined : 'bearer');
      }
      // Set before an admin refusal too: the caller is signed in, and limited as that user.
      request.session = session;
      if (required === 'admin' && session.user.role !== 'admin') {
        await decideBeforeRefusal(request, reply);
        throw errors.adminRequired();
      }
    });
  });
};

export default fp(authPlugin, { name: 'urlshortener-auth', fastify: '5.x', dependencies: ['@fastify/cookie'] });
