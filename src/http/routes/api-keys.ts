import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { API_KEY_NAME_MAX_LENGTH, type ApiKey } from '../../domain/api-key.js';
import type { ApiKeyService } from '../../services/api-key-service.js';
import { errorResponse, rowId } from '../schemas.js';

export interface ApiKeyRoutesOptions {
  readonly apiKeys: ApiKeyService;
}

const tags = ['api_keys'];

const ApiKeyRead = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  prefix: Type.String({ description: 'The first characters of the key, to recognise it.' }),
  created_at: Type.String({ format: 'date-time' }),
  last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'Last use, to the minute (written at most once a minute).',
  }),
  expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  revoked_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

const ApiKeyCreated = Type.Object({
  ...ApiKeyRead.properties,
  key: Type.String({
    description: 'The key itself: shown this once, never again. Send it as `Authorization: Bearer <key>`.',
  }),
});

const signedIn = {
  401: errorResponse('`Not authenticated`.'),
  403: errorResponse('A CSRF failure (cookie sessions only).'),
};

const createSchema = {
  operationId: 'create_api_key',
  summary: 'Make an API key (shown once)',
  description: 'The key is `us_` and 43 base64url characters (256 random bits); only its SHA-256 is stored.',
  tags,
  body: Type.Object(
    {
      name: Type.String({ minLength: 1, maxLength: API_KEY_NAME_MAX_LENGTH }),
      expires_at: Type.Optional(
        Type.String({ format: 'date-time', description: 'In the future; none: never expires.' }),
      ),
    },
    { additionalProperties: false },
  ),
  response: {
    201: { ...ApiKeyCreated, description: 'Created; `key` is shown this once.' },
    ...signedIn,
    415: errorResponse('The body is not JSON.'),
    422: errorResponse('A bad name, or an expiry that is not in the future.'),
  },
};

const listSchema = {
  operationId: 'list_api_keys',
  summary: "The caller's API keys, newest first (revoked ones included)",
  tags,
  response: {
    200: Type.Array(ApiKeyRead, { description: 'The keys, without the keys themselves.' }),
    401: signedIn[401],
  },
};

const revokeSchema = {
  operationId: 'revoke_api_key',
  summary: 'Revoke an API key: refused at once on every instance',
  tags,
  params: Type.Object({ id: rowId(1) }),
  response: {
    204: Type.Null({ description: 'Revoked (also when it already was).' }),
    ...signedIn,
    404: errorResponse('`API key not found`: no such key of the caller.'),
  },
};

function view({ user_id: _user, ...key }: ApiKey) {
  return key;
}

/** `POST`/`GET /api-keys` and `DELETE /api-keys/{id}` under `/api/v1/auth`: the caller's own keys. */
export const apiKeyRoutes: FastifyPluginAsyncTypebox<ApiKeyRoutesOptions> = async (app, { apiKeys }) => {
  const config = { auth: 'user', rateLimit: 'writes' } as const;
  app.post('/api-keys', { config, schema: createSchema }, async (request, reply) => {
    const created = await apiKeys.create(request.session!.user.id, request.body.name, request.body.expires_at);
    return reply.code(201).send({ ...view(created.apiKey), key: created.key });
  });
  app.get('/api-keys', { config: { auth: 'user' }, schema: listSchema }, async (request) =>
    (await apiKeys.list(request.session!.user.id)).map(view),
  );
  app.delete('/api-keys/:id', { config, schema: revokeSchema }, async (request, reply) => {
    await apiKeys.revoke(request.session!.user.id, request.params.id);
    return reply.code(204).send(null);
  });
};
