import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { errors } from '../../domain/errors.js';
import type { AuthService, Session } from '../../services/auth-service.js';
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

/**
 * Authentication by the JWT in the `access_token` cookie, for routes that declare `config.auth`.
 * No valid session → 401 `Not authenticated`; a user on an admin route → 403.
 * Register inside the `/api/` scope only, after @fastify/cookie.
 */
const authPlugin: FastifyPluginAsync<AuthPluginOptions> = async (app, { auth }) => {
  app.decorateRequest('session', null);
  app.addHook('onRequest', async (request) => {
    const required = request.routeOptions.config.auth;
    if (required === undefined) return;
    const token = request.cookies[ACCESS_TOKEN_COOKIE];
    const session = token ? await auth.authenticate(token) : undefined;
    if (!session) throw errors.notAuthenticated();
    if (required === 'admin' && session.user.role !== 'admin') throw errors.adminRequired();
    request.session = session;
  });
};

export default fp(authPlugin, { name: 'urlshortener-auth', fastify: '5.x', dependencies: ['@fastify/cookie'] });
