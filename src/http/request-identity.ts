import type { FastifyRequest } from 'fastify';

/**
 * The id of the signed-in user, when authentication has run for this request (the auth plugin
 * sets `request.session` on routes that require it), else undefined.
 */
export function signedInUserId(request: FastifyRequest): string | undefined {
  const session = (request as { session?: { user?: { id?: unknown } } | null }).session;
  const id = session?.user?.id;
  return id === undefined || id === null ? undefined : String(id);
}
