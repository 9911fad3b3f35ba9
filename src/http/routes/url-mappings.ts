import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { CachedTarget } from '../../support/redirect-cache.js';
import type { UrlMappingService } from '../../services/url-mapping-service.js';
import {
  CodeParams,
  errorResponse,
  ListQuery,
  ref,
  UrlMappingCreate,
  UrlMappingRead,
  UrlMappingUpdate,
} from '../schemas.js';
import { Type } from 'typebox';

export interface UrlMappingRoutesOptions {
  readonly service: UrlMappingService;
  readonly cacheControl: string;
}

const tags = ['url_mapping'];
const invalidCode = errorResponse('The code breaks its rules (6 to 10 letters and digits).');
const notFound = errorResponse('No mapping has this code.');

const shortenSchema = {
  operationId: 'shorten',
  summary: 'Create a short URL mapping',
  tags,
  body: ref(UrlMappingCreate),
  response: {
    201: { ...ref(UrlMappingRead), description: 'The mapping was created.' },
    409: errorResponse('The code is taken.'),
    413: errorResponse('The body is larger than the limit.'),
    415: errorResponse('The body is not JSON.'),
    422: errorResponse('The body breaks a field rule, or the code is reserved.'),
  },
};

const listSchema = {
  operationId: 'list_all',
  summary: 'List URL mappings in id order',
  description:
    'Without a query, every mapping. With `limit` (and `after`), one page; a `Link: </urls?limit=N&after=ID>; rel="next"` header points at the next one while more exist.',
  tags,
  querystring: ListQuery,
  response: {
    200: { type: 'array', items: ref(UrlMappingRead), description: 'The mappings.' },
    422: errorResponse('A query parameter breaks its rule.'),
  },
};

const resolveSchema = {
  operationId: 'resolve',
  summary: 'Redirect to the target URL',
  description: 'Answers 302 with `Location`. GET counts a click; HEAD answers the same without counting.',
  tags,
  params: CodeParams,
  response: {
    302: {
      description: 'Redirect to the target URL.',
      headers: { Location: Type.String({ format: 'uri' }) },
      type: 'null',
    },
    404: notFound,
    422: invalidCode,
  },
};

const updateSchema = {
  operationId: 'update',
  summary: 'Change a mapping',
  description:
    'Omitted or null fields stay as they are. A new code moves the mapping: the old code answers 404 at once.',
  tags,
  params: CodeParams,
  body: ref(UrlMappingUpdate),
  response: {
    200: { ...ref(UrlMappingRead), description: 'The mapping as it is now.' },
    404: notFound,
    409: errorResponse('The new code is taken.'),
    413: errorResponse('The body is larger than the limit.'),
    415: errorResponse('The body is not JSON.'),
    422: errorResponse('The code or the body breaks a rule.'),
  },
};

const deleteSchema = {
  operationId: 'delete',
  summary: 'Delete a mapping',
  tags,
  params: CodeParams,
  response: {
    204: { description: 'Deleted.', type: 'null' },
    404: notFound,
    422: invalidCode,
  },
};

/** `POST /shorten`, `GET /urls`, and `GET|HEAD|PATCH|DELETE /{code}`. */
export const urlMappingRoutes: FastifyPluginAsyncTypebox<UrlMappingRoutesOptions> = async (
  app,
  { service, cacheControl },
) => {
  app.post('/shorten', { schema: shortenSchema }, async (request, reply) =>
    reply.code(201).send(await service.shorten(request.body)),
  );

  app.get('/urls', { schema: listSchema }, async (request, reply) => {
    const { limit, after } = request.query;
    const page = await service.list({ limit, after });
    if (page.nextAfter !== undefined) {
      void reply.header('link', `</urls?limit=${limit}&after=${page.nextAfter}>; rel="next"`);
    }
    return page.mappings;
  });

  app.get(
    '/:code',
    { config: { quietLogs: true, rateLimit: 'redirects' }, schema: resolveSchema },
    // Not async: a cache hit answers without a promise in the way.
    (request, reply) => {
      const redirect = (target: CachedTarget) => {
        void reply.header('cache-control', cacheControl).redirect(target.location, 302);
      };
      const target = service.resolve(request.params.code, request.method === 'GET');
      if (target instanceof Promise) return target.then(redirect);
      redirect(target);
    },
  );

  app.patch('/:code', { schema: updateSchema }, async (request) => service.update(request.params.code, request.body));

  app.delete('/:code', { schema: deleteSchema }, async (request, reply) => {
    await service.delete(request.params.code);
    return reply.code(204).send(null);
  });
};
