import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { CHANNEL_TYPES } from '../../domain/notification.js';
import type { NotificationService } from '../../services/notification-service.js';
import { callerOf } from '../caller.js';
import { errorResponse, oneOf } from '../schemas.js';

const Channel = Type.Object({
  id: Type.String(),
  type: oneOf(CHANNEL_TYPES),
  name: Type.String(),
  url: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
});

const tags = ['notifications'];

const notSignedIn = errorResponse('Not signed in.');

const createSchema = {
  operationId: 'create_channel',
  summary: 'Add a notification channel',
  description:
    '`webhook`: a JSON POST signed per Standard Webhooks; the signing `secret` is in this answer only. `chat`: a Slack-compatible `{"text": …}` POST.',
  tags,
  body: Type.Object(
    {
      type: oneOf(CHANNEL_TYPES),
      name: Type.String({ minLength: 1, maxLength: 100 }),
      url: Type.String({ minLength: 1, maxLength: 2048 }),
    },
    { additionalProperties: false },
  ),
  response: {
    201: Type.Object(
      { ...Channel.properties, secret: Type.Optional(Type.String()) },
      { description: 'Created. Keep the secret: it is not shown again.' },
    ),
    401: notSignedIn,
    409: errorResponse('The caller has as many channels as one user may (NOTIFICATION_MAX_CHANNELS_PER_USER).'),
    422: errorResponse('The body breaks a rule, or the destination is not allowed.'),
  },
};

const listSchema = {
  operationId: 'list_channels',
  summary: "The caller's notification channels",
  tags,
  response: { 200: Type.Array(Channel, { description: 'The channels.' }), 401: notSignedIn },
};

const deleteSchema = {
  operationId: 'delete_channel',
  summary: 'Remove a notification channel',
  tags,
  params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
  response: {
    204: { description: 'Removed.', type: 'null' },
    401: notSignedIn,
    404: errorResponse('No such channel of yours.'),
  },
};

/** `/api/v1/notifications/channels`: the caller's own channels (CSRF applies: it is under /api/). */
export const notificationChannelRoutes: FastifyPluginAsyncTypebox<{ notifications: NotificationService }> = async (
  app,
  { notifications },
) => {
  const config = { auth: 'user' } as const;
  app.post('/channels', { config, schema: createSchema }, async (request, reply) =>
    reply.code(201).send(await notifications.create(callerOf(request), request.body)),
  );
  app.get('/channels', { config, schema: listSchema }, async (request) => notifications.list(callerOf(request)));
  app.delete('/channels/:id', { config, schema: deleteSchema }, async (request, reply) => {
    await notifications.delete(callerOf(request), request.params.id);
    return reply.code(204).send(null);
  });
};
