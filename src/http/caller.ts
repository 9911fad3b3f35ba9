import type { FastifyReply, FastifyRequest } from 'fastify';
import { errors } from '../domain/errors.js';
import type { AuthService } from '../services/auth-service.js';
import type { Caller } from '../services/execution-service.js';
import { bearerKey } from './plugins/auth.js';
import { csrfFailure, SAFE_METHODS } from './plugins/csrf.js';
import { decideBeforeRefusal } from './plugins/rate-limit.js';
import { ACCESS_TOKEN_COOKIE } from './plugins/session-cookies.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route identifies its caller (`optionalCaller`): signing in is optional there (the OpenAPI document says so). */
    caller?: 'optional';
  }
  interface FastifyRequest {
    /** On a route with `optionalCaller`: who is calling, undefined when anonymous. */
    caller?: Caller;
  }
}

/** Who is calling, on a route that declares `config.auth` (so a session is there). */
export function callerOf(request: FastifyRequest): Caller {
  const user = request.session!.user;
  return { userId: user.id, role: user.role };
}

/**
 * The options of a route where signing in is optional: its caller is identified (`identifyCaller`)
 * as the request arrives, before its rate-limit decision, so that a signed-in caller (session or
 * API key) is limited as that user, like on every `/api/` route; the handler reads
 * `request.caller`. A credential that does not authenticate is refused with its decision taken.
 */
export function optionalCaller(callers: CallerIdentification) {
  return {
    config: { caller: 'optional' as const },
    onRequest: async (request: FastifyRequest, reply: FastifyReply) => {
      try {
        request.caller = await identifyCaller(request, callers);
      } catch (error) {
        await decideBeforeRefusal(request, reply);
        throw error;
      }
    },
  };
}

/** What `identifyCaller` needs: the sessions (and, with API keys, the keys). */
export interface CallerIdentification {
  readonly auth: AuthService;
}

/**
 * The caller of a route where signing in is optional (the URL routes and `POST /api/v1/links`):
 * undefined for an anonymous request, which behaves as spec §4 says.
 *
 * The session cookie makes the request the session's user — on an unsafe one (POST, PATCH,
 * DELETE) only together with the `X-CSRF-Token` the `/api/` scope checks (the same check, the
 * same code). Without a valid one the cookie is not used and the request is anonymous: spec §5.4
 * step 3 answers no CSRF failure outside `/api/`, and a page elsewhere that makes the browser send
 * the cookie then acts as any anonymous client could, never as the user. A cookie that no longer
 * authenticates answers 401. Never called on the redirect path (`GET|HEAD /{code}`).
 *
 * An API key (`Authorization: Bearer`) comes first: it makes the request its user's with no
 * cookie and so no CSRF; a revoked, expired or unknown key answers 401.
 */
export async function identifyCaller(
  request: FastifyRequest,
  { auth }: CallerIdentification,
): Promise<Caller | undefined> {
  const key = bearerKey(request);
  if (key !== undefined) {
    // An API key: no cookie is involved, so no CSRF; a key that does not authenticate is a 401.
    const session = await auth.authenticateApiKey(key);
    if (!session) throw errors.notAuthenticated('bearer');
    return { userId: session.user.id, role: session.user.role };
  }
  const cookies = request.cookies ?? parseCookies(request.headers.cookie);
  const accessToken = cookies[ACCESS_TOKEN_COOKIE];
  if (accessToken === undefined || accessToken === '') return undefined;
  const unsafe = !SAFE_METHODS.has(request.method);
  if (unsafe && csrfFailure(request, cookies, accessToken, auth) !== undefined) return undefined;
  const session = await auth.authenticate(accessToken);
  if (!session) throw errors.notAuthenticated();
  return { userId: session.user.id, role: session.user.role };
}

/**
 * The cookies of a `Cookie` header, for routes outside the `/api/` scope (where @fastify/cookie
 * is not registered, so that the redirect path never parses them). The first of a repeated name wins.
 */
export function parseCookies(header: string | undefined): Record<string, string> {
  const cookies: Record<string, string> = {};
  if (header === undefined) return cookies;
  for (const pair of header.split(';')) {
    const at = pair.indexOf('=');
    if (at < 0) continue;
    const name = pair.slice(0, at).trim();
    if (name === '' || name in cookies) continue;
    let value = pair.slice(at + 1).trim();
    if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) value = value.slice(1, -1);
    try {
      cookies[name] = decodeURIComponent(value);
    } catch {
      cookies[name] = value;
    }
  }
  return cookies;
}
