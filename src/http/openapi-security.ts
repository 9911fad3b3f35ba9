import type { FastifySchema, RouteOptions } from 'fastify';
import { rateLimitGroupOf } from './plugins/rate-limit.js';
import { errorResponse } from './schemas.js';

/**
 * The OpenAPI security schemes: the cookie session (spec §5.2) with its CSRF header (§5.4), and
 * the bearer API key. A cookie session needs the CSRF header on every non-GET request under
 * /api/; a bearer request carries no cookie, so it needs none.
 */
export const SECURITY_SCHEMES = {
  session: {
    type: 'apiKey',
    in: 'cookie',
    name: 'access_token',
    description: 'The session JWT set by `POST /api/v1/auth/login` (httpOnly).',
  },
  csrf: {
    type: 'apiKey',
    in: 'header',
    name: 'X-CSRF-Token',
    description:
      'The `csrf_token` cookie value, sent back on every POST, PUT, PATCH and DELETE under /api/ made with the session cookie.',
  },
  apiKey: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'us_ + 43 base64url characters',
    description: 'An API key from `POST /api/v1/auth/api-keys`: `Authorization: Bearer <key>`. No cookie, no CSRF.',
  },
} as const;

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

type DocumentedSchema = FastifySchema & {
  hide?: boolean;
  security?: Record<string, string[]>[];
  response?: Record<string, unknown>;
};

/**
 * @fastify/swagger's `transform`: each operation says which schemes apply (from the route's
 * `config.auth`) and the 401, 403 and 429 answers it can give, where its own schema does not
 * already describe them. The routes themselves are not changed.
 */
export function documentSecurity({ schema, url, route }: { schema: FastifySchema; url: string; route: RouteOptions }) {
  const documented = schema as DocumentedSchema | undefined;
  if (!documented || documented.hide) return { schema, url };
  const response: Record<string, unknown> = { ...documented.response };
  const extra: Partial<DocumentedSchema> = {};
  const auth = route.config?.auth;
  const methods = Array.isArray(route.method) ? route.method : [route.method];
  const safe = methods.every((m) => SAFE_METHODS.has(m.toUpperCase()));
  if (auth !== undefined) {
    extra.security = [safe ? { session: [] } : { session: [], csrf: [] }, { apiKey: [] }];
    response[401] ??= errorResponse('`Not authenticated`: no valid session cookie or API key.');
    // A user's read can be refused for neither its role nor CSRF: no 403 to declare.
    if (auth === 'admin') {
      response[403] ??= errorResponse(
        safe ? '`Admin privileges required`.' : '`Admin privileges required`, or a CSRF failure.',
      );
    } else if (!safe) {
      response[403] ??= errorResponse('A CSRF failure (cookie sessions only).');
    }
  }
  if (route.config?.caller === 'optional') {
    // Anonymous callers are welcome (spec §4); a session (with CSRF on writes) or a key makes the caller known.
    extra.security = [{}, safe ? { session: [] } : { session: [], csrf: [] }, { apiKey: [] }];
  }
  if (rateLimitGroupOf(route) !== false) {
    response[429] ??= errorResponse('`Rate limit exceeded`; `Retry-After` gives the seconds to wait.');
  }
  return { schema: { ...documented, ...extra, response }, url };
}
