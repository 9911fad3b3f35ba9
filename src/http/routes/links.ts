import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { UrlMappingService } from '../../services/url-mapping-service.js';
import { type CallerIdentification, optionalCaller } from '../caller.js';
import { errorResponse, LinkCreate, ref, UrlMappingRead } from '../schemas.js';

export interface LinkRoutesOptions {
  readonly service: UrlMappingService;
  readonly callers: CallerIdentification;
}

/** `POST /links` under `/api/v1`: a mapping from the URL alone (README "Links and their owners"). */
export const linkRoutes: FastifyPluginAsyncTypebox<LinkRoutesOptions> = async (app, { service, callers }) => {
  app.post(
    '/links',
    {
      ...optionalCaller(callers),
      schema: {
        operationId: 'create_link',
        summary: 'Create a short link from a URL',
        description:
          'Created now with no clicks; the code is generated (CODE_LENGTH random letters and digits, never a reserved word) unless given. Optional `expires_at` (in the future) and `max_visits` (at least 1) limit how long and how often it answers. A signed-in caller owns the link. Under LINK_WRITE_POLICY `owned`, anonymous callers get 401.',
        tags: ['url_mapping'],
        body: ref(LinkCreate),
        response: {
          201: { ...ref(UrlMappingRead), description: 'The link was created.' },
          401: errorResponse(
            '`Not authenticated`: an invalid session, or an anonymous caller under the `owned` policy.',
          ),
          403: errorResponse('A CSRF failure (a request with the session cookie).'),
          409: errorResponse('The code given is taken.'),
          413: errorResponse('The body is larger than the limit.'),
          415: errorResponse('The body is not JSON.'),
          422: errorResponse(
            'The body breaks a field rule (`expires_at` must be in the future), or the code given is reserved.',
          ),
          503: errorResponse('No free code was found in a few tries (the codes of CODE_LENGTH are running out).'),
        },
      },
    },
    async (request, reply) => {
      return reply.code(201).send(await service.create(request.body, request.caller));
    },
  );
};
