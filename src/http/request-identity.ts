import type { FastifyRequest } from 'fastify';

/**
 * The id of the signed-in user, when authentication has run for this request (the auth plugin
 * sets `request.session` on routes that require it; `optionalCaller` sets `request.caller` on the
 * URL routes), else undefined.
 */
export function signedInUserId(request: FastifyRequest): string | undefined {
  const known = request as { session?: { user?: { id?: unknown } } | null; caller?: { userId?: unknown } };
  const id = known.session?.user?.id ?? known.caller?.userId;
  return id === undefined || id === null ? undefined : String(id);
}
