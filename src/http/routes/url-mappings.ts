import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { CachedTarget } from '../../support/redirect-cache.js';
import type { ListSort } from '../../ports/url-mapping-repository.js';
import type { UrlMappingService } from '../../services/url-mapping-service.js';
import { type CallerIdentification, optionalCaller } from '../caller.js';
import {
  CodeParams,
  errorResponse,
  ListQuery,
  type ListSortParam,
  ref,
  UrlMappingCreate,
  UrlMappingRead,
  UrlMappingUpdate,
} from '../schemas.js';
import { Type } from 'typebox';

export interface UrlMappingRoutesOptions {
  readonly service: UrlMappingService;
  readonly cacheControl: string;
  /** Who is calling, on every route but the redirect (see `identifyCaller`). */
  readonly callers: CallerIdentification;
}

const tags = ['url_mapping'];
const invalidCode = errorResponse('The code breaks its rules (6 to 10 letters and digits).');
const notFound = errorResponse(
  'No mapping has this code (also what an anonymous caller gets for a mapping a user owns).',
);
/** What a caller who signs in, or is not allowed to, may get (README "Links and their owners"). */
const unauthenticated = errorResponse(
  '`Not authenticated`: the session cookie is no longer valid, or LINK_WRITE_POLICY is `owned` and the caller is anonymous.',
);
const forbidden = errorResponse(
  'A signed-in caller who is neither the owner nor an administrator (`Only the owner of this link or an administrator may change it`).',
);

/** `sort=-created_at` → created_at, descending. */
export function parseSort(sort: ListSortParam | undefined): ListSort | undefined {
  if (sort === undefined) return undefined;
  const descending = sort.startsWith('-');
  return { field: (descending ? sort.slice(1) : sort) as ListSort['field'], descending };
}

/** The next page's address: today's `limit` and `after`, then the search and order as given. */
export function nextPageLink(query: Readonly<Record<string, string | number | undefined>>, after: number): string {
  const params = new URLSearchParams({ limit: String(query.limit), after: String(after) });
  for (const name of ['owner', 'q', 'sort']) {
    const value = query[name];
    if (value !== undefined) params.set(name, String(value));
  }
  return `</urls?${params.toString()}>; rel="next"`;
}

const shortenSchema = {
  operationId: 'shorten',
  summary: 'Create a short URL mapping',
  tags,
  body: ref(UrlMappingCreate),
  response: {
    201: { ...ref(UrlMappingRead), description: 'The mapping was created.' },
    401: unauthenticated,
    409: errorResponse('The code is taken.'),
    413: errorResponse('The body is larger than the limit.'),
    415: errorResponse('The body is not JSON.'),
    422: errorResponse('The body breaks a field rule (`expires_at` must be in the future), or the code is reserved.'),
  },
};

const listSchema = {
  operationId: 'list_all',
  summary: 'List URL mappings in id order',
  description:
    'Without a query, every mapping. With `limit` (and `after`), one page; a `Link: </urls?limit=N&after=ID>; rel="next"` header (carrying `owner`, `q` and `sort` too when given) points at the next one while more exist. `owner=me` lists the caller\'s own, `q` finds a substring of the code or URL, `sort` orders by `created_at` or `click_count` (`-` first: descending). Under LINK_WRITE_POLICY `owned`, a user sees only their own mappings and an administrator all of them.',
  tags,
  querystring: ListQuery,
  response: {
    200: { type: 'array', items: ref(UrlMappingRead), description: 'The mappings.' },
    401: unauthenticated,
    422: errorResponse('A query parameter breaks its rule.'),
  },
};

const resolveSchema = {
  operationId: 'resolve',
  summary: 'Redirect to the target URL',
  description:
    'Answers 302 with `Location`. GET counts a click; HEAD answers the same without counting. A link past its `expires_at`, or that has answered its `max_visits`, answers 410 and counts nothing.',
  tags,
  params: CodeParams,
  response: {
    302: {
      description: 'Redirect to the target URL.',
      headers: { Location: Type.String({ format: 'uri' }) },
      type: 'null',
    },
    404: notFound,
    410: errorResponse(
      'The link has expired (`This link expired at <time>.`) or reached its visit limit (`This link has reached its limit of <n> visits.`).',
    ),
    422: invalidCode,
  },
};

const updateSchema = {
  operationId: 'update',
  summary: 'Change a mapping',
  description:
    'Omitted or null fields stay as they are, except `expires_at` and `max_visits`, which null clears. A new code moves the mapping: the old code answers 404 at once.',
  tags,
  params: CodeParams,
  body: ref(UrlMappingUpdate),
  response: {
    200: { ...ref(UrlMappingRead), description: 'The mapping as it is now.' },
    401: unauthenticated,
    403: forbidden,
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
    401: unauthenticated,
    403: forbidden,
    404: notFound,
    422: invalidCode,
  },
};

/**
 * `POST /shorten`, `GET /urls`, and `GET|HEAD|PATCH|DELETE /{code}`. Every one but the redirect
 * knows its caller (anonymous, or the session's user): owners and the write policy apply there.
 */
export const urlMappingRoutes: FastifyPluginAsyncTypebox<UrlMappingRoutesOptions> = async (
  app,
  { service, cacheControl, callers },
) => {
  const identified = optionalCaller(callers);
  app.post('/shorten', { ...identified, schema: shortenSchema }, async (request, reply) => {
    return reply.code(201).send(await service.shorten(request.body, request.caller));
  });

  app.get('/urls', { ...identified, schema: listSchema }, async (request, reply) => {
    const caller = request.caller;
    const { limit, after, owner, q, sort } = request.query;
    const page = await service.list({ limit, after, q, sort: parseSort(sort), mine: owner === 'me' }, caller);
    if (page.nextAfter !== undefined) void reply.header('link', nextPageLink(request.query, page.nextAfter));
    return page.mappings;
  });

  app.get(
    '/:code',
    { config: { quietLogs: true, rateLimit: 'redirects', bareHeaders: true }, schema: resolveSchema },
    // Not async: a cache hit answers without a promise in the way.
    (request, reply) => {
      const redirect = (target: CachedTarget) => {
        void reply.header('cache-control', cacheControl).redirect(target.location, 302);
      };
      const target = service.resolve(request.params.code, request.method === 'GET', request.raw.rawHeaders, request.ip);
      if (target instanceof Promise) return target.then(redirect);
      redirect(target);
    },
  );

  app.patch('/:code', { ...identified, schema: updateSchema }, async (request) =>
    service.update(request.params.code, request.body, request.caller),
  );

  app.delete('/:code', { ...identified, schema: deleteSchema }, async (request, reply) => {
    await service.delete(request.params.code, request.caller);
    return reply.code(204).send(null);
  });
};
