import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { DeadLetterManager } from '../../services/dead-letter-manager.js';
import { errorResponse, oneOf, rowId } from '../schemas.js';

const STATUSES = ['retrying', 'retried', 'parked', 'discarded'] as const;

const DeadLetter = Type.Object({
  id: Type.Integer(),
  event_id: Type.String(),
  event_type: Type.String(),
  topic: Type.String(),
  partition: Type.Integer(),
  group: Type.String({ description: 'The consumer group that gave up on it.' }),
  status: oneOf(STATUSES),
  attempts: Type.Integer(),
  error: Type.String(),
  headers: Type.Record(Type.String(), Type.String()),
  envelope: Type.Unknown(),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
  retry_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description:
      'While `retrying`: when it is re-published to its topic, unless an admin retries or discards it first; otherwise null.',
  }),
});

const tags = ['dead_letters'];
const IdParams = Type.Object({ id: rowId(1) });
const adminOnly = {
  401: errorResponse('Not signed in.'),
  403: errorResponse('Administrators only.'),
};

const notFound = errorResponse('No such dead letter.');

const listSchema = {
  operationId: 'list_dead_letters',
  summary: 'Dead letters, oldest first',
  tags,
  querystring: Type.Object(
    {
      status: Type.Optional(oneOf(STATUSES)),
      limit: Type.Integer({ minimum: 1, maximum: 500, default: 100 }),
      after: Type.Optional(rowId(0)),
    },
    { additionalProperties: false },
  ),
  response: { 200: Type.Array(DeadLetter, { description: 'The dead letters.' }), ...adminOnly },
};

const getSchema = {
  operationId: 'get_dead_letter',
  summary: 'One dead letter, with its headers and event',
  tags,
  params: IdParams,
  response: { 200: { ...DeadLetter, description: 'The dead letter.' }, ...adminOnly, 404: notFound },
};

const retrySchema = {
  operationId: 'retry_dead_letter',
  summary: 'Re-publish it to its topic now',
  tags,
  params: IdParams,
  response: {
    200: { ...DeadLetter, description: 'Re-published.' },
    ...adminOnly,
    404: notFound,
    422: errorResponse(
      'The event bus can never take this event (e.g. larger than the broker takes); it stays as it was.',
    ),
  },
};

const discardSchema = {
  operationId: 'discard_dead_letter',
  summary: 'Mark it discarded',
  tags,
  params: IdParams,
  response: { 200: { ...DeadLetter, description: 'Discarded.' }, ...adminOnly, 404: notFound },
};

/** `/api/v1/admin/dlq`: list, inspect, retry and discard dead letters (admins). */
export const deadLetterRoutes: FastifyPluginAsyncTypebox<{ deadLetters: DeadLetterManager }> = async (
  app,
  { deadLetters },
) => {
  const config = { auth: 'admin' } as const;
  app.get('/dlq', { config, schema: listSchema }, async (request) => deadLetters.list(request.query));
  app.get('/dlq/:id', { config, schema: getSchema }, async (request) => deadLetters.get(request.params.id));
  app.post('/dlq/:id/retry', { config, schema: retrySchema }, async (request) => deadLetters.retry(request.params.id));
  app.post('/dlq/:id/discard', { config, schema: discardSchema }, async (request) =>
    deadLetters.discard(request.params.id),
  );
};
