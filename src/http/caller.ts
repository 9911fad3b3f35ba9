import type { FastifyRequest } from 'fastify';
import type { Caller } from '../services/execution-service.js';

/** Who is calling, on a route that declares `config.auth` (so a session is there). */
export function callerOf(request: FastifyRequest): Caller {
  const user = request.session!.user;
  return { userId: user.id, role: user.role };
}
