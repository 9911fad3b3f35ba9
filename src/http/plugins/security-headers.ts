import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { addRouteHook } from './route-hooks.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set no security headers on this route's answers: the redirect path, whose 302 has no body. */
    bareHeaders?: boolean;
  }
}

/** On every answer with a body: browsers must take its `Content-Type` as given, never guess one. */
export const NOSNIFF = { 'x-content-type-options': 'nosniff' } as const;

/** Session answers (everything under `/api/`, login and `/me` with their CSRF token above all). */
export const NO_STORE = { 'cache-control': 'no-store' } as const;

/** The OpenAPI UI at `/docs/`: never framed (clickjacking), nothing loaded from elsewhere. */
export const DOCS_HEADERS = { ...NOSNIFF, 'x-frame-options': 'DENY', 'referrer-policy': 'same-origin' } as const;

/**
 * Swagger UI's own CSP, adjusted: never framed; styles from this origin and inline (the UI sets
 * inline styles from its script, as the web client does; scripts stay `'self'` only); without
 * `upgrade-insecure-requests`, which would send a plain-HTTP deployment's assets to HTTPS.
 */
export function docsCsp(policy: string): string {
  return policy
    .replace("frame-ancestors 'self'", "frame-ancestors 'none'")
    .replace(/style-src [^;]*;/, "style-src 'self' 'unsafe-inline';")
    .replace(/\s*upgrade-insecure-requests;?/, '')
    .trim();
}

const setHeaders =
  (headers: Readonly<Record<string, string>>) =>
  (_request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    reply.headers(headers);
    done();
  };

/**
 * `X-Content-Type-Options: nosniff` on every route's answers, errors included, but the redirect
 * path's (`bareHeaders`), which stays without a hook. Register before any route.
 */
export function registerSecurityHeaders(app: FastifyInstance): void {
  const nosniff = setHeaders(NOSNIFF);
  app.addHook('onRoute', (route) => {
    if (route.config?.bareHeaders) return;
    addRouteHook(route, 'onRequest', nosniff);
  });
}

/** For an encapsulated scope (the session routes): `Cache-Control: no-store` on every answer. */
export const noStore = setHeaders(NO_STORE);
