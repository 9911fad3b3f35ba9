import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { type TSchema, Type } from 'typebox';
import type { RuntimeSettings } from '../../services/runtime-settings.js';
import { errorResponse, oneOf } from '../schemas.js';

export interface AdminSettingsRoutesOptions {
  readonly settings: RuntimeSettings;
}

/** `GET`/`PATCH /settings` under `/api/v1/admin`: the runtime settings, administrators only. */
export const adminSettingsRoutes: FastifyPluginAsyncTypebox<AdminSettingsRoutesOptions> = async (app, { settings }) => {
  const properties: Record<string, TSchema> = {};
  for (const d of settings.definitions) {
    properties[d.name] =
      d.choices === undefined
        ? Type.Integer({ minimum: d.minimum, maximum: d.maximum, description: d.description })
        : oneOf(d.choices, { description: d.description });
  }
  const Values = Type.Object(properties, { additionalProperties: false });
  const Changes = Type.Partial(Values);
  const denied = {
    401: errorResponse('`Not authenticated`.'),
    403: errorResponse('Not an administrator, or a CSRF failure.'),
  };

  app.get(
    '/settings',
    {
      config: { auth: 'admin' },
      schema: {
        operationId: 'get_settings',
        summary: 'The runtime settings in force',
        tags: ['admin'],
        response: { 200: { ...Values, description: 'Every runtime setting and its value.' }, ...denied },
      },
    },
    async () => settings.current(),
  );

  app.patch(
    '/settings',
    {
      config: { auth: 'admin' },
      schema: {
        operationId: 'update_settings',
        summary: 'Change runtime settings',
        description: 'Persisted, and in force on every instance within one second. Omitted settings stay as they are.',
        tags: ['admin'],
        body: Changes,
        response: {
          200: { ...Values, description: 'Every runtime setting as it is now.' },
          ...denied,
          415: errorResponse('The body is not JSON.'),
          422: errorResponse('An unknown setting, or a value out of its range.'),
        },
      },
    },
    async (request) => settings.update(request.body as Record<string, unknown>),
  );
};
